//! What each processor type accepts: its properties (with defaults and value kinds) and its
//! relationships. Validation and the processors read the same table, so a property is
//! declared once.

pub use weir_flow_api::spec::{Dynamic, ProcessorSpec, PropertyKind, PropertySpec};

use PropertyKind as K;

const fn p(
    name: &'static str,
    required: bool,
    default: Option<&'static str>,
    kind: PropertyKind,
) -> PropertySpec {
    PropertySpec::new(name, required, default, kind)
}

/// Every processor type of the traditional engine.
pub const SPECS: &[ProcessorSpec] = &[
    ProcessorSpec {
        kind: "GenerateFlowFile",
        properties: &[
            p("File Size", true, Some("0 B"), K::Size),
            p("Batch Size", true, Some("1"), K::Count),
            p(
                "Data Format",
                true,
                Some("Text"),
                K::Choice(&["Text", "Binary"]),
            ),
            p("Unique FlowFiles", true, Some("false"), K::Bool),
            p("Custom Text", false, None, K::Expression),
        ],
        relationships: &["success"],
        dynamic: Dynamic::Attributes,
        source: true,
    },
    ProcessorSpec {
        kind: "GetFile",
        properties: &[
            p("Input Directory", true, None, K::Text),
            p("File Filter", true, Some("[^\\.].*"), K::Regex),
            p("Keep Source File", true, Some("false"), K::Bool),
            p("Recurse Subdirectories", true, Some("true"), K::Bool),
            p("Batch Size", true, Some("10"), K::Count),
            p("Minimum File Age", true, Some("0 sec"), K::Duration),
        ],
        relationships: &["success"],
        dynamic: Dynamic::None,
        source: true,
    },
    ProcessorSpec {
        kind: "PutFile",
        properties: &[
            p("Directory", true, None, K::Expression),
            p(
                "Conflict Resolution Strategy",
                true,
                Some("fail"),
                K::Choice(&["replace", "ignore", "fail"]),
            ),
            p("Create Missing Directories", true, Some("true"), K::Bool),
            // Unset: true in flows with `sync: always`, else false (see definition).
            p("Sync", false, None, K::Bool),
        ],
        relationships: &["success", "failure"],
        dynamic: Dynamic::None,
        source: false,
    },
    ProcessorSpec {
        kind: "SplitText",
        properties: &[
            p("Line Split Count", true, None, K::Count),
            p("Header Line Count", true, Some("0"), K::Count),
            p("Remove Trailing Newlines", true, Some("true"), K::Bool),
        ],
        relationships: &["splits", "original", "failure"],
        dynamic: Dynamic::None,
        source: false,
    },
    ProcessorSpec {
        kind: "MergeContent",
        properties: &[
            p("Minimum Number of Entries", true, Some("1"), K::Count),
            p("Maximum Number of Entries", true, Some("1000"), K::Count),
            p("Minimum Group Size", true, Some("0 B"), K::Size),
            p("Max Bin Age", false, None, K::Duration),
            p("Maximum number of Bins", true, Some("5"), K::Count),
            p("Correlation Attribute Name", false, None, K::Text),
            p("Demarcator", false, None, K::Text),
        ],
        relationships: &["merged", "original", "failure"],
        dynamic: Dynamic::None,
        source: false,
    },
    ProcessorSpec {
        kind: "UpdateAttribute",
        properties: &[],
        relationships: &["success"],
        dynamic: Dynamic::Attributes,
        source: false,
    },
    ProcessorSpec {
        kind: "RouteOnAttribute",
        properties: &[p(
            "Routing Strategy",
            true,
            Some("Route to Property name"),
            K::Choice(&[
                "Route to Property name",
                "Route to 'matched' if all match",
                "Route to 'matched' if any matches",
            ]),
        )],
        relationships: &["unmatched"],
        dynamic: Dynamic::Routes,
        source: false,
    },
    ProcessorSpec {
        kind: "ReplaceText",
        properties: &[
            p("Search Value", true, Some("(?s)(^.*$)"), K::Expression),
            p("Replacement Value", true, Some("$1"), K::Expression),
            p(
                "Replacement Strategy",
                true,
                Some("Regex Replace"),
                K::Choice(&[
                    "Regex Replace",
                    "Literal Replace",
                    "Prepend",
                    "Append",
                    "Always Replace",
                ]),
            ),
            p(
                "Evaluation Mode",
                true,
                Some("Line-by-Line"),
                K::Choice(&["Entire text", "Line-by-Line"]),
            ),
        ],
        relationships: &["success", "failure"],
        dynamic: Dynamic::None,
        source: false,
    },
    ProcessorSpec {
        kind: "CompressContent",
        properties: &[
            p(
                "Mode",
                true,
                Some("compress"),
                K::Choice(&["compress", "decompress"]),
            ),
            p(
                "Compression Format",
                true,
                Some("gzip"),
                K::Choice(&["gzip"]),
            ),
        ],
        relationships: &["success", "failure"],
        dynamic: Dynamic::None,
        source: false,
    },
    ProcessorSpec {
        kind: "CryptographicHashContent",
        properties: &[p(
            "Hash Algorithm",
            true,
            Some("SHA-256"),
            K::Choice(&["SHA-224", "SHA-256", "SHA-384", "SHA-512"]),
        )],
        relationships: &["success", "failure"],
        dynamic: Dynamic::None,
        source: false,
    },
    ProcessorSpec {
        kind: "LogAttribute",
        properties: &[
            p(
                "Log Level",
                true,
                Some("info"),
                K::Choice(&["trace", "debug", "info", "warn", "error"]),
            ),
            p("Log Payload", true, Some("false"), K::Bool),
        ],
        relationships: &["success"],
        dynamic: Dynamic::None,
        source: false,
    },
    ProcessorSpec {
        kind: "InvokeHTTP",
        properties: &[
            p(
                "HTTP Method",
                true,
                Some("GET"),
                K::Choice(&["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]),
            ),
            p("HTTP URL", true, None, K::Expression),
            p("Connection Timeout", true, Some("5 secs"), K::Duration),
            p("Read Timeout", true, Some("15 secs"), K::Duration),
        ],
        relationships: &["Original", "Response", "Retry", "No Retry", "Failure"],
        dynamic: Dynamic::None,
        source: false,
    },
    ProcessorSpec {
        kind: "ListenHTTP",
        properties: &[
            p("Listening Port", true, None, K::Count),
            p("Base Path", true, Some("contentListener"), K::Text),
            p("Listening Address", true, Some("127.0.0.1"), K::Text),
        ],
        relationships: &["success"],
        dynamic: Dynamic::None,
        source: true,
    },
    ProcessorSpec {
        kind: "ConsumeAMQP",
        properties: &[
            p("Queue", true, None, K::Text),
            p("Brokers", true, Some("127.0.0.1:5672"), K::Text),
            p("Virtual Host", true, Some("/"), K::Text),
            p("User Name", true, Some("guest"), K::Text),
            p("Password", false, None, K::Text),
            p("Batch Size", true, Some("10"), K::Count),
            p("Prefetch Count", true, Some("100"), K::Count),
            // 0: no limit. Otherwise a message delivered more often goes to `dead-letter`,
            // a relationship the processor then has.
            p("Max Deliveries", true, Some("0"), K::Count),
        ],
        relationships: &["success"],
        dynamic: Dynamic::None,
        source: true,
    },
    ProcessorSpec {
        kind: "PublishAMQP",
        properties: &[
            p("Exchange Name", true, Some(""), K::Expression),
            p("Routing Key", true, None, K::Expression),
            p("Brokers", true, Some("127.0.0.1:5672"), K::Text),
            p("Virtual Host", true, Some("/"), K::Text),
            p("User Name", true, Some("guest"), K::Text),
            p("Password", false, None, K::Text),
        ],
        relationships: &["success", "failure"],
        dynamic: Dynamic::None,
        source: false,
    },
    ProcessorSpec {
        kind: "ConsumeJetStream",
        properties: &[
            p("URL", true, Some("nats://127.0.0.1:4222"), K::Text),
            p("Stream", true, None, K::Text),
            p("Subject", true, None, K::Text),
            p("Durable Consumer", true, None, K::Text),
            p("User Name", false, None, K::Text),
            p("Password", false, None, K::Text),
            p("Batch Size", true, Some("10"), K::Count),
            p("Ack Wait", true, Some("30 sec"), K::Duration),
            // As ConsumeAMQP's.
            p("Max Deliveries", true, Some("0"), K::Count),
        ],
        relationships: &["success"],
        dynamic: Dynamic::None,
        source: true,
    },
    ProcessorSpec {
        kind: "PublishJetStream",
        properties: &[
            p("URL", true, Some("nats://127.0.0.1:4222"), K::Text),
            p("Subject", true, None, K::Expression),
            p("User Name", false, None, K::Text),
            p("Password", false, None, K::Text),
        ],
        relationships: &["success", "failure"],
        dynamic: Dynamic::None,
        source: false,
    },
    ProcessorSpec {
        kind: "PutDatabaseRecord",
        properties: &[
            p("Database URL", true, None, K::Text),
            p("Table Name", true, None, K::Text),
            p(
                "Statement Type",
                true,
                Some("INSERT"),
                K::Choice(&["INSERT", "UPSERT"]),
            ),
            p("Update Keys", false, None, K::Text),
            p("User Name", false, None, K::Text),
            p("Password", false, None, K::Text),
            p("Batch Size", true, Some("100"), K::Count),
            // In a stateless group each is capped by the group's timeout.
            p("Connect Timeout", true, Some("10 sec"), K::Duration),
            p("Statement Timeout", true, Some("30 sec"), K::Duration),
            p("Lock Timeout", true, Some("10 sec"), K::Duration),
        ],
        relationships: &["success", "failure", "retry"],
        dynamic: Dynamic::None,
        source: false,
    },
    ProcessorSpec {
        kind: "Funnel",
        properties: &[],
        relationships: &["success"],
        dynamic: Dynamic::None,
        source: false,
    },
];

/// The spec of `kind`, if the traditional engine has it.
pub fn spec(kind: &str) -> Option<&'static ProcessorSpec> {
    SPECS.iter().find(|s| s.kind == kind)
}
