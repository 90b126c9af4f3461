//! The wasm bundle: only the pages' islands (the dataset upload area) run here;
//! `public/live.js` loads it on the pages that have one and calls
//! `hydrate` once, then each island's own entry point.

// Linked for its islands' exported entry points, which nothing here names.
extern crate app;

#[wasm_bindgen::prelude::wasm_bindgen]
pub fn hydrate() {
    console_error_panic_hook::set_once();
    leptos::mount::hydrate_islands();
}
