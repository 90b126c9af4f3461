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
        let (mut css, mut js, mut wasm) = (base.clone(), base.clone(), base);
        if options.hash_files {
            // cargo-leptos writes `css: HASH`, `js: HASH`, `wasm: HASH` next to the binary.
            let hashes = std::env::current_exe()
                .ok()
                .and_then(|exe| exe.parent().map(|dir| dir.join(options.hash_file.as_ref())))
                .and_then(|path| std::fs::read_to_string(path).ok())
                .unwrap_or_default();
            for (file, hash) in hashes.lines().filter_map(|l| l.split_once(':')) {
                let name = match file.trim() {
                    "css" => &mut css,
                    "js" => &mut js,
                    "wasm" => &mut wasm,
                    _ => continue,
                };
                name.push('.');
                name.push_str(hash.trim());
            }
        } else if option_env!("LEPTOS_OUTPUT_NAME").is_none() {
            // A plain wasm-bindgen build names the module `NAME_bg.wasm`.
            wasm.push_str("_bg");
        }
        AssetNames { css, js, wasm }
    })
}

/// `<link>`s for the stylesheet, the JS module and the wasm, and the inline
/// module script (with this request's CSP nonce) that starts hydration.
#[component]
pub fn AssetTags(options: LeptosOptions) -> impl IntoView {
    let n = names(&options);
    let pkg = format!("/{}", options.site_pkg_dir);
    let js = format!("{pkg}/{}.js", n.js);
    let wasm = format!("{pkg}/{}.wasm", n.wasm);
    let boot = format!("import({js:?}).then(m => m.default({{module_or_path: {wasm:?}}}).then(() => m.hydrate()));");
    view! {
        <link id="leptos" rel="stylesheet" href=format!("{pkg}/{}.css", n.css)/>
        <link rel="modulepreload" href=js/>
        <link rel="preload" href=wasm r#as="fetch" r#type="application/wasm" crossorigin=""/>
        <script type="module" nonce=use_nonce()>{boot}</script>
    }
}
