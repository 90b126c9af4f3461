//! The page shell's stylesheet link and the script that loads and hydrates
//! the wasm, with the hashed file names worked out once per process.
//!
//! `leptos_meta::HashedStylesheet` and `leptos::HydrationScripts` read
//! cargo-leptos' `hash.txt` from disk on every page they render — about 6 %
//! of a small page's CPU under load. The names cannot change while the
//! process runs (they name the files this binary was built with).

use leptos::{nonce::use_nonce, prelude::*};
use std::sync::OnceLock;

struct AssetNames {
    css: String,
    js: String,
    wasm: String,
}

fn names(options: &LeptosOptions) -> &'static AssetNames {
    static NAMES: OnceLock<AssetNames> = OnceLock::new();
    NAMES.get_or_init(|| {
        let base = options.output_name.to_string();
        if options.hash_files {
            // cargo-leptos writes the hashes next to the binary; no file: plain names.
            let hashes = std::env::current_exe()
                .ok()
                .and_then(|exe| exe.parent().map(|dir| dir.join(options.hash_file.as_ref())))
                .and_then(|path| std::fs::read_to_string(path).ok())
                .unwrap_or_default();
            hashed_names(&base, &hashes)
        } else {
            // A plain wasm-bindgen build names the module `NAME_bg.wasm`.
            let wasm = if option_env!("LEPTOS_OUTPUT_NAME").is_none() { format!("{base}_bg") } else { base.clone() };
            AssetNames { css: base.clone(), js: base, wasm }
        }
    })
}

/// The names for cargo-leptos' `hash.txt` (`css: HASH`, `js: HASH`,
/// `wasm: HASH`, one per line): `BASE.HASH`, or `BASE` where a line is missing.
fn hashed_names(base: &str, hashes: &str) -> AssetNames {
    let mut names = AssetNames { css: base.into(), js: base.into(), wasm: base.into() };
    for (file, hash) in hashes.lines().filter_map(|l| l.split_once(':')) {
        let name = match file.trim() {
            "css" => &mut names.css,
            "js" => &mut names.js,
            "wasm" => &mut names.wasm,
            _ => continue,
        };
        name.push('.');
        name.push_str(hash.trim());
    }
    names
}

/// The stylesheet, and `live.js` (links, forms and refreshes without
/// reloads; it loads the wasm only on pages with islands) with this
/// request's CSP nonce and the wasm's hashed names.
#[component]
pub fn AssetTags(options: LeptosOptions) -> impl IntoView {
    let n = names(&options);
    let pkg = format!("/{}", options.site_pkg_dir);
    // Islands mode: from here on nothing is hydrated but the islands, so the
    // pages' resources are not serialized into the HTML for a browser that
    // never reads them (what Leptos' own `HydrationScripts` does here).
    if let Some(context) = Owner::current_shared_context() {
        context.set_is_hydrating(false);
    }
    view! {
        <link id="leptos" rel="stylesheet" href=format!("{pkg}/{}.css", n.css)/>
        <script
            type="module"
            src="/live.js"
            nonce=use_nonce()
            data-js=format!("{pkg}/{}.js", n.js)
            data-wasm=format!("{pkg}/{}.wasm", n.wasm)
        ></script>
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_file_gets_its_own_hash_and_a_missing_line_leaves_the_plain_name() {
        let n = hashed_names("gantry", "js: J1\nwasm: W-2_x\n\nsplit: S\n");
        assert_eq!((n.css.as_str(), n.js.as_str(), n.wasm.as_str()), ("gantry", "gantry.J1", "gantry.W-2_x"));
        let n = hashed_names("gantry", "css: C\njs: J\nwasm: W\n");
        assert_eq!((n.css.as_str(), n.js.as_str(), n.wasm.as_str()), ("gantry.C", "gantry.J", "gantry.W"));
    }
}
