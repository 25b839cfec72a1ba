//! The dashboard's files, embedded in the binary: a newcomer builds Weir without a Node
//! toolchain, and the server needs no files at run time.
//!
//! Every file of `assets/` that the dashboard uses is one line of [`ASSETS`]: its path in the
//! URL, its content type, and its bytes (`include_bytes!`, so a missing file fails the build).

/// One embedded file.
#[derive(Debug, Clone, Copy)]
pub struct Asset {
    /// Its path under the server's root, without the leading `/` (`index.html`).
    pub path: &'static str,
    /// Its `Content-Type`.
    pub content_type: &'static str,
    /// Its bytes.
    pub bytes: &'static [u8],
}

/// The embedded files. `index.html` is the page every dashboard route (`/`, `/jobs/{id}`,
/// `/flows/{id}`, `/flows/{id}/provenance`) answers with.
pub const ASSETS: &[Asset] = &[Asset {
    path: "index.html",
    content_type: "text/html; charset=utf-8",
    bytes: include_bytes!("../assets/index.html"),
}];

/// The embedded file at `path` (no leading `/`).
pub fn asset(path: &str) -> Option<&'static Asset> {
    ASSETS.iter().find(|a| a.path == path)
}

/// The page of the dashboard's routes.
pub fn index() -> &'static Asset {
    asset("index.html").expect("index.html is embedded")
}

/// Whether `path` (no leading `/`) is a route of the dashboard, answered with `index.html`.
pub fn is_page(path: &str) -> bool {
    let parts: Vec<&str> = path.trim_end_matches('/').split('/').collect();
    matches!(
        parts.as_slice(),
        [""] | ["jobs"] | ["flows"] | ["jobs", _] | ["flows", _] | ["flows", _, "provenance"]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dashboard_routes_are_pages() {
        for page in ["", "jobs/3", "flows/1", "flows/1/provenance", "jobs/3/"] {
            assert!(is_page(page), "{page}");
        }
        for other in ["api/v1/jobs", "jobs/3/x", "favicon.ico", "metrics"] {
            assert!(!is_page(other), "{other}");
        }
        assert_eq!(index().content_type, "text/html; charset=utf-8");
    }
}
