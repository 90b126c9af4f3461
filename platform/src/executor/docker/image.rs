//! Snapshots on a Docker Engine: committing a container to an image tag and
//! removing such an image again.

use super::super::*;
use super::DockerExecutor;
use bollard::errors::Error as BError;
use bollard::models::ContainerConfig;
use bollard::query_parameters::{CommitContainerOptions, RemoveImageOptions};

impl DockerExecutor {
    pub async fn commit_container(&self, id: &str, reference: &str) -> Result<ImageInfo, ExecError> {
        let (repo, tag) = split_reference(reference)?;
        let docker = self.client_with(super::COMMIT_TIMEOUT).await?;
        // Paused while committing, as `docker commit` does, so the files are
        // consistent; the data volume is not part of the image.
        let options = CommitContainerOptions {
            container: Some(id.to_string()),
            repo: Some(repo.to_string()),
            tag: Some(tag.to_string()),
            comment: Some("Gantry snapshot".into()),
            pause: true,
            ..Default::default()
        };
        docker.commit_container(options, ContainerConfig::default()).await.map_err(|e| self.err(e, "commit"))?;
        self.image_info(reference)
            .await?
            .ok_or_else(|| ExecError::Failed(format!("image {reference} vanished right after the commit")))
    }

    pub async fn image_info(&self, reference: &str) -> Result<Option<ImageInfo>, ExecError> {
        let docker = self.client().await?;
        match docker.inspect_image(reference).await {
            Ok(i) => Ok(Some(ImageInfo { id: i.id.unwrap_or_default(), size_bytes: i.size.unwrap_or(0) })),
            Err(BError::DockerResponseServerError { status_code: 404, .. }) => Ok(None),
            Err(e) => Err(self.err(e, "image inspect")),
        }
    }

    pub async fn remove_image(&self, reference: &str) -> Result<(), ExecError> {
        let docker = self.client().await?;
        match docker
            .remove_image(
                reference,
                Some(RemoveImageOptions { force: false, noprune: false, ..Default::default() }),
                None,
            )
            .await
        {
            Ok(_) => Ok(()),
            Err(BError::DockerResponseServerError { status_code: 404, .. }) => Ok(()),
            Err(BError::DockerResponseServerError { status_code: 409, message }) => {
                Err(ExecError::Failed(format!("image {reference} is still used by a container: {message}")))
            }
            Err(e) => Err(self.err(e, "image remove")),
        }
    }
}

/// `repo:tag` → (`repo`, `tag`); a snapshot reference always has a tag.
pub(crate) fn split_reference(reference: &str) -> Result<(&str, &str), ExecError> {
    match reference.rsplit_once(':') {
        Some((repo, tag)) if !repo.is_empty() && !tag.is_empty() && !tag.contains('/') => Ok((repo, tag)),
        _ => Err(ExecError::Failed(format!("image reference {reference:?} needs a repository and a tag"))),
    }
}
