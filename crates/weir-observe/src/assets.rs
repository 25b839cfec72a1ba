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
/// `/flows/{id}`, `/flows/{id}/provenance`) answers with; it loads `assets/style.css` and the
/// ES module `assets/app.js`, which imports the other modules (`app.js` routes, `api.js`
/// talks to the REST API, `graph.js` lays graphs out, one module per page).
pub const ASSETS: &[Asset] = &[
    Asset {
        path: "index.html",
        content_type: "text/html; charset=utf-8",
        bytes: include_bytes!("../assets/index.html"),
    },
    Asset {
        path: "assets/api.js",
        content_type: "text/javascript; charset=utf-8",
        bytes: include_bytes!("../assets/api.js"),
    },
    Asset {
        path: "assets/app.js",
        content_type: "text/javascript; charset=utf-8",
        bytes: include_bytes!("../assets/app.js"),
    },
    Asset {
        path: "assets/dom.js",
        content_type: "text/javascript; charset=utf-8",
        bytes: include_bytes!("../assets/dom.js"),
    },
    Asset {
        path: "assets/flow.js",
        content_type: "text/javascript; charset=utf-8",
        bytes: include_bytes!("../assets/flow.js"),
    },
    Asset {
        path: "assets/format.js",
        content_type: "text/javascript; charset=utf-8",
        bytes: include_bytes!("../assets/format.js"),
    },
    Asset {
        path: "assets/graph.js",
        content_type: "text/javascript; charset=utf-8",
        bytes: include_bytes!("../assets/graph.js"),
    },
    Asset {
        path: "assets/job.js",
        content_type: "text/javascript; charset=utf-8",
        bytes: include_bytes!("../assets/job.js"),
    },
    Asset {
        path: "assets/overview.js",
        content_type: "text/javascript; charset=utf-8",
        bytes: include_bytes!("../assets/overview.js"),
    },
    Asset {
        path: "assets/provenance.js",
        content_type: "text/javascript; charset=utf-8",
        bytes: include_bytes!("../assets/provenance.js"),
    },
    Asset {
        path: "assets/style.css",
        content_type: "text/css; charset=utf-8",
        bytes: include_bytes!("../assets/style.css"),
    },
];

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
