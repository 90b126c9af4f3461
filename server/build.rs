//! Copies xterm.js (npm `@xterm/xterm`, `@xterm/addon-fit`) and Idiomorph's
//! ES module (npm `idiomorph`, the DOM morph of `public/live.js`), installed
//! by `scripts/setup.sh` with `npm ci`, into the build, so the binary serves
//! them itself (no CDN, nothing fetched at run time). When one is missing the
//! build still succeeds and `/vendor/<name>` answers 404 with what to run.

use std::{env, fs, path::PathBuf};

const FILES: &[(&str, &str)] = &[
    ("xterm.js", "node_modules/@xterm/xterm/lib/xterm.js"),
    ("xterm.css", "node_modules/@xterm/xterm/css/xterm.css"),
    ("addon-fit.js", "node_modules/@xterm/addon-fit/lib/addon-fit.js"),
    ("idiomorph.js", "node_modules/idiomorph/dist/idiomorph.esm.js"),
];

fn main() {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let root = manifest.parent().expect("the server crate is inside the workspace").to_path_buf();
    let out = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR"));
    for (name, rel) in FILES {
        let src = root.join(rel);
        println!("cargo:rerun-if-changed={}", src.display());
        let bytes = match fs::read(&src) {
            Ok(b) => b,
            Err(_) => {
                println!(
                    "cargo:warning={} is missing: run `npm ci` (scripts/setup.sh does) and rebuild, or {}",
                    src.display(),
                    if *name == "idiomorph.js" {
                        "live.js does not run (pages work as plain HTML)"
                    } else {
                        "the browser terminal is unavailable"
                    }
                );
                Vec::new()
            }
        };
        fs::write(out.join(name), bytes).expect("write to OUT_DIR");
    }
}
