//! Records for ConvertRecord and SplitRecord: NiFi's record readers (JsonTreeReader,
//! CSVReader) and writers (JsonRecordSetWriter, CSVRecordSetWriter), configured by the
//! processor's own properties since flows have no controller services, schemas given as
//! Avro JSON (`Schema Text`) or inferred from the data, and the conversion of each value to
//! its field's type.
//!
//! A flow file's records are read whole into memory ([`RecordSet`]: a schema and each
//! record's values in the schema's field order), then written. A record that does not fit
//! the schema fails the whole flow file, naming the record (1-based), its line where the
//! format knows it, and the field.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::Arc;

use serde_json::Value;

use super::spec::{K, PropertySpec, p};

/// The Record Reader choices.
pub(crate) const JSON_READER: &str = "JsonTreeReader";
pub(crate) const CSV_READER: &str = "CSVReader";
/// The Record Writer choices.
pub(crate) const JSON_WRITER: &str = "JsonRecordSetWriter";
pub(crate) const CSV_WRITER: &str = "CSVRecordSetWriter";
/// The Schema Access Strategy choices.
pub(crate) const INFER_SCHEMA: &str = "Infer Schema";
pub(crate) const SCHEMA_TEXT: &str = "Use 'Schema Text' Property";
/// The Output Grouping choices of the JSON writer.
const ARRAY: &str = "Array";
const ONE_LINE_PER_OBJECT: &str = "One Line Per Object";

/// The properties a record processor takes for its reader and writer (NiFi sets them on
/// the controller services), followed by `$extra`.
macro_rules! record_properties {
    ($($extra:expr),* $(,)?) => {
        &[
            $crate::spec::p("Record Reader", true, None, $crate::spec::K::Choice(&[$crate::records::JSON_READER, $crate::records::CSV_READER]))
                .about("How the content is read: JsonTreeReader (a JSON array of objects, or one object per line) or CSVReader."),
            $crate::spec::p("Record Writer", true, None, $crate::spec::K::Choice(&[$crate::records::JSON_WRITER, $crate::records::CSV_WRITER]))
                .about("How the records are written: JsonRecordSetWriter or CSVRecordSetWriter."),
            $crate::records::SCHEMA_ACCESS_STRATEGY,
            $crate::records::SCHEMA_TEXT_PROPERTY,
            $crate::records::VALUE_SEPARATOR,
            $crate::records::FIRST_LINE_HEADER,
            $crate::records::QUOTE_CHARACTER,
            $crate::records::ESCAPE_CHARACTER,
            $crate::records::NULL_STRING,
            $crate::records::INCLUDE_HEADER_LINE,
            $crate::records::OUTPUT_GROUPING,
            $($extra),*
        ]
    };
}
pub(crate) use record_properties;

pub(crate) const SCHEMA_ACCESS_STRATEGY: PropertySpec = p(
    "Schema Access Strategy",
    true,
    Some(INFER_SCHEMA),
    K::Choice(&[INFER_SCHEMA, SCHEMA_TEXT]),
)
.about("Where the records' schema comes from: inferred from the data, or the Schema Text property; the writer writes the records with the same schema.");
pub(crate) const SCHEMA_TEXT_PROPERTY: PropertySpec = p("Schema Text", false, None, K::Text)
    .about("An Avro schema (JSON) of a record, used when the Schema Access Strategy says so.");
pub(crate) const VALUE_SEPARATOR: PropertySpec = p("Value Separator", true, Some(","), K::Text)
    .about("The character between the values of a CSV line (`\\t` for a tab), read and written.");
pub(crate) const FIRST_LINE_HEADER: PropertySpec = p(
    "Treat First Line as Header",
    true,
    Some("false"),
    K::Bool,
)
.about(
    "Whether the CSV reader takes the first line as the column names (always with Infer Schema).",
);
pub(crate) const QUOTE_CHARACTER: PropertySpec = p("Quote Character", true, Some("\""), K::Text)
    .about("The character that quotes a CSV value holding separators, quotes or line breaks.");
pub(crate) const ESCAPE_CHARACTER: PropertySpec = p("Escape Character", false, Some("\\"), K::Text)
    .about("The character that escapes a quote (or itself) inside a quoted CSV value; empty for none (quotes are then doubled).");
pub(crate) const NULL_STRING: PropertySpec = p("Null String", false, None, K::Text)
    .about("A CSV value read as null, and written for a null (unset: a null is written as an empty value).");
pub(crate) const INCLUDE_HEADER_LINE: PropertySpec =
    p("Include Header Line", true, Some("true"), K::Bool)
        .about("Whether the CSV writer writes the field names as its first line.");
pub(crate) const OUTPUT_GROUPING: PropertySpec = p(
    "Output Grouping",
    true,
    Some(ARRAY),
    K::Choice(&[ARRAY, ONE_LINE_PER_OBJECT]),
)
.about("How the JSON writer groups records: one JSON array, or one object per line (JSON Lines).");

/// The type of a field's non-null values, as an Avro schema names it.
#[derive(Debug, Clone, PartialEq)]
pub enum FieldType {
    /// A 32-bit integer.
    Int,
    /// A 64-bit integer.
    Long,
    /// A 32-bit floating-point number (held as 64-bit).
    Float,
    /// A 64-bit floating-point number.
    Double,
    /// `true` or `false`.
    Boolean,
    /// Text (Avro `string` and `bytes`).
    String,
    /// One of the symbols.
    Enum(Vec<String>),
    /// An array, map or nested record, or a value of an inferred JSON schema: any JSON value,
    /// kept as it is (written to CSV as JSON text).
    Any,
}

impl fmt::Display for FieldType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FieldType::Int => f.write_str("int"),
            FieldType::Long => f.write_str("long"),
            FieldType::Float => f.write_str("float"),
            FieldType::Double => f.write_str("double"),
            FieldType::Boolean => f.write_str("boolean"),
            FieldType::String => f.write_str("string"),
            FieldType::Enum(symbols) => write!(f, "enum {symbols:?}"),
            FieldType::Any => f.write_str("any"),
        }
    }
}

/// One field of a record schema.
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    /// Its name.
    pub name: String,
    /// The types its non-null values may have, tried in order (an Avro union's branches
    /// other than `null`); empty for a field that is always null.
    pub types: Vec<FieldType>,
    /// The value of a record without it (Avro's `default`), else null.
    pub default: Value,
}

/// A record schema: its fields in order.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Schema {
    /// The fields.
    pub fields: Vec<Field>,
}

/// Why a schema text is not a record schema Weir can use.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct SchemaError(String);

/// Parses an Avro schema (JSON) of a record: primitive types (`null`, `boolean`, `int`,
/// `long`, `float`, `double`, `string`, `bytes`), unions of them (`["null", "int"]`),
/// `enum`s, logical types (as their underlying type), and arrays, maps and nested records
/// (their values kept as JSON).
///
/// # Errors
/// [`SchemaError`]: not JSON, not a record, a field without a name or type, a name twice,
/// an unknown type.
pub fn parse_schema(text: &str) -> Result<Schema, SchemaError> {
    let json: Value =
        serde_json::from_str(text).map_err(|e| SchemaError(format!("not JSON: {e}")))?;
    if json.get("type").and_then(Value::as_str) != Some("record") {
        return Err(SchemaError(
            "the schema must be an Avro record: {\"type\": \"record\", \"name\": ..., \"fields\": [...]}".into(),
        ));
    }
    let Some(fields) = json.get("fields").and_then(Value::as_array) else {
        return Err(SchemaError("the record has no `fields` array".into()));
    };
    let mut seen = HashSet::new();
    let mut out = Vec::with_capacity(fields.len());
    for (i, f) in fields.iter().enumerate() {
        let Some(name) = f.get("name").and_then(Value::as_str) else {
            return Err(SchemaError(format!("field {} has no name", i + 1)));
        };
        if !seen.insert(name) {
            return Err(SchemaError(format!("field `{name}` is named twice")));
        }
        let Some(ty) = f.get("type") else {
            return Err(SchemaError(format!("field `{name}` has no type")));
        };
        let branches: Vec<&Value> = match ty {
            Value::Array(branches) => branches.iter().collect(),
            other => vec![other],
        };
        let mut types = Vec::new();
        for b in branches {
            if let Some(t) =
                branch_type(b).map_err(|why| SchemaError(format!("field `{name}`: {why}")))?
            {
                types.push(t);
            }
        }
        let mut field = Field {
            name: name.to_string(),
            types,
            default: Value::Null,
        };
        if let Some(default) = f.get("default") {
            field.default = convert(default.clone(), &field)
                .map_err(|why| SchemaError(format!("field `{name}`: default {why}")))?;
        }
        out.push(field);
    }
    Ok(Schema { fields: out })
}

/// The type of one union branch; `None` for `null`.
fn branch_type(t: &Value) -> Result<Option<FieldType>, String> {
    let name = match t {
        Value::String(s) => s.as_str(),
        Value::Object(o) => match o.get("type") {
            Some(Value::String(s)) if s == "enum" => {
                let symbols = o
                    .get("symbols")
                    .and_then(Value::as_array)
                    .ok_or("an enum needs its `symbols`")?
                    .iter()
                    .map(|s| {
                        s.as_str()
                            .map(str::to_string)
                            .ok_or("enum symbols are strings")
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                return Ok(Some(FieldType::Enum(symbols)));
            }
            Some(Value::String(s))
                if matches!(s.as_str(), "array" | "map" | "record" | "fixed") =>
            {
                return Ok(Some(FieldType::Any));
            }
            // A logical type (`{"type": "long", "logicalType": "timestamp-millis"}`) is its
            // underlying type.
            Some(inner) => return branch_type(inner),
            None => return Err("a type object needs a `type`".into()),
        },
        other => return Err(format!("`{other}` is not a type")),
    };
    Ok(Some(match name {
        "null" => return Ok(None),
        "boolean" => FieldType::Boolean,
        "int" => FieldType::Int,
        "long" => FieldType::Long,
        "float" => FieldType::Float,
        "double" => FieldType::Double,
        "string" | "bytes" => FieldType::String,
        other => return Err(format!("unknown type `{other}`")),
    }))
}

/// Converts a JSON value to `field`'s type: the first of its types the value fits. Text is
/// read as a number or boolean where the type asks (`"12"` fits `int`), and numbers and
/// booleans fit `string` as their text; null fits every field.
fn convert(value: Value, field: &Field) -> Result<Value, String> {
    if value.is_null() {
        return Ok(Value::Null);
    }
    for t in &field.types {
        let fitted = match (t, &value) {
            (FieldType::Any, v) => Some(v.clone()),
            (t, Value::String(text)) => fit_text(text, t),
            (FieldType::Int, Value::Number(n)) => whole(n)
                .filter(|i| i32::try_from(*i).is_ok())
                .map(Value::from),
            (FieldType::Long, Value::Number(n)) => whole(n).map(Value::from),
            (FieldType::Float | FieldType::Double, Value::Number(n)) => {
                Some(Value::Number(n.clone()))
            }
            (FieldType::Boolean, Value::Bool(b)) => Some(Value::Bool(*b)),
            (FieldType::String, Value::Number(n)) => Some(Value::String(n.to_string())),
            (FieldType::String, Value::Bool(b)) => Some(Value::String(b.to_string())),
            _ => None,
        };
        if let Some(v) = fitted {
            return Ok(v);
        }
    }
    Err(misfit(&value.to_string(), field))
}

/// A JSON number as a whole number, when it is one (`3.0` is).
fn whole(n: &serde_json::Number) -> Option<i64> {
    n.as_i64().or_else(|| {
        n.as_f64()
            .filter(|f| f.fract() == 0.0 && *f >= i64::MIN as f64 && *f <= i64::MAX as f64)
            .map(|f| f as i64)
    })
}

/// Text as a value of type `t`, if it reads as one.
fn fit_text(text: &str, t: &FieldType) -> Option<Value> {
    match t {
        FieldType::String => Some(Value::String(text.to_string())),
        FieldType::Int => text.trim().parse::<i32>().ok().map(Value::from),
        FieldType::Long => text.trim().parse::<i64>().ok().map(Value::from),
        FieldType::Float | FieldType::Double => parse_finite(text.trim()).map(Value::from),
        FieldType::Boolean => match text.trim() {
            t if t.eq_ignore_ascii_case("true") => Some(Value::Bool(true)),
            t if t.eq_ignore_ascii_case("false") => Some(Value::Bool(false)),
            _ => None,
        },
        FieldType::Enum(symbols) => symbols
            .iter()
            .any(|s| s == text)
            .then(|| Value::String(text.to_string())),
        // Text for an array, map or record is its JSON, else the text itself.
        FieldType::Any => {
            Some(serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_string())))
        }
    }
}

/// Converts text (a CSV value) to `field`'s type.
fn convert_text(text: &str, field: &Field) -> Result<Value, String> {
    field
        .types
        .iter()
        .find_map(|t| fit_text(text, t))
        .ok_or_else(|| misfit(&format!("{text:?}"), field))
}

/// A finite decimal number (Rust also reads `inf` and `NaN`, which JSON cannot hold).
fn parse_finite(text: &str) -> Option<f64> {
    let looks_numeric = text
        .bytes()
        .all(|b| b.is_ascii_digit() || matches!(b, b'-' | b'+' | b'.' | b'e' | b'E'));
    text.parse::<f64>()
        .ok()
        .filter(|f| looks_numeric && f.is_finite())
}

fn misfit(shown: &str, field: &Field) -> String {
    let shown: String = shown.chars().take(60).collect();
    if field.types.is_empty() {
        return format!("{shown} is not null, and the field's type is null");
    }
    let types: Vec<String> = field.types.iter().map(ToString::to_string).collect();
    format!("{shown} does not fit type {}", types.join(" | "))
}

/// Why a flow file's records cannot be read: where, and what.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}", self.describe())]
pub struct RecordError {
    /// The record, from 1 (0: before the first, e.g. the CSV header).
    pub record: u64,
    /// The line, from 1, where the format tells it.
    pub line: Option<u64>,
    /// The field, when one value is at fault.
    pub field: Option<String>,
    /// What is wrong.
    pub message: String,
}

impl RecordError {
    fn new(record: u64, line: Option<u64>, message: impl Into<String>) -> RecordError {
        RecordError {
            record,
            line,
            field: None,
            message: message.into(),
        }
    }

    fn describe(&self) -> String {
        let mut out = if self.record == 0 {
            "header".to_string()
        } else {
            format!("record {}", self.record)
        };
        if let Some(line) = self.line {
            out.push_str(&format!(" (line {line})"));
        }
        if let Some(field) = &self.field {
            out.push_str(&format!(", field `{field}`"));
        }
        out.push_str(": ");
        out.push_str(&self.message);
        out
    }
}

/// A flow file's records: their schema and each one's values in its fields' order.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RecordSet {
    /// The schema (given, or inferred from the data).
    pub schema: Arc<Schema>,
    /// The records.
    pub records: Vec<Vec<Value>>,
}

/// The CSV dialect of a reader or writer.
#[derive(Debug, Clone, PartialEq)]
pub struct CsvFormat {
    /// Between values.
    pub separator: u8,
    /// Around values that need it.
    pub quote: u8,
    /// Before a quote (or itself) inside a quoted value; `None`: quotes are doubled.
    pub escape: Option<u8>,
    /// The reader takes the first line as the column names.
    pub header: bool,
    /// Read as null, and written for null.
    pub null_string: Option<String>,
    /// The writer writes the field names first.
    pub include_header: bool,
}

impl Default for CsvFormat {
    fn default() -> CsvFormat {
        CsvFormat {
            separator: b',',
            quote: b'"',
            escape: Some(b'\\'),
            header: true,
            null_string: None,
            include_header: true,
        }
    }
}

/// How records are read.
#[derive(Debug, Clone, PartialEq)]
pub enum Reader {
    /// JsonTreeReader: a JSON array of objects, or objects one after another (JSON Lines).
    Json,
    /// CSVReader.
    Csv(CsvFormat),
}

/// How records are written.
#[derive(Debug, Clone, PartialEq)]
pub enum Writer {
    /// JsonRecordSetWriter: one array, or one object per line.
    Json {
        /// One object per line (JSON Lines) instead of an array.
        one_line_per_object: bool,
    },
    /// CSVRecordSetWriter.
    Csv(CsvFormat),
}

/// A record processor's reader, writer and schema, from its properties.
#[derive(Debug, Clone)]
pub struct RecordConfig {
    /// The reader.
    pub reader: Reader,
    /// The writer.
    pub writer: Writer,
    /// The schema of `Schema Text`, when the strategy uses it; else inferred per flow file.
    pub schema: Option<Arc<Schema>>,
}

/// A property of a record processor that cannot be used: its name and why.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{property}: {message}")]
pub struct ConfigError {
    /// The property's name.
    pub property: &'static str,
    /// What is wrong.
    pub message: String,
}

/// One CSV character of a property: a single ASCII character, or `\t` for a tab.
fn csv_char(property: &'static str, value: &str) -> Result<u8, ConfigError> {
    let bad = || ConfigError {
        property,
        message: format!("`{value}` is not one ASCII character (or \\t)"),
    };
    match value {
        "\\t" => Ok(b'\t'),
        v if v.len() == 1 && v.is_ascii() && v != "\n" && v != "\r" => Ok(v.as_bytes()[0]),
        _ => Err(bad()),
    }
}

impl RecordConfig {
    /// The configuration of a record processor whose properties (declared ones defaulted)
    /// `property` gives.
    ///
    /// # Errors
    /// [`ConfigError`] naming the property: a schema text that is missing or not a record
    /// schema, a CSV character that is not one ASCII character.
    pub fn from_properties<'a>(
        property: impl Fn(&str) -> Option<&'a str>,
    ) -> Result<RecordConfig, ConfigError> {
        let is =
            |name: &str, value: &str| property(name).is_some_and(|v| v.eq_ignore_ascii_case(value));
        let schema = if is(SCHEMA_ACCESS_STRATEGY.name, SCHEMA_TEXT) {
            let text = property(SCHEMA_TEXT_PROPERTY.name)
                .filter(|t| !t.trim().is_empty())
                .ok_or_else(|| ConfigError {
                    property: SCHEMA_TEXT_PROPERTY.name,
                    message: format!("required when Schema Access Strategy is {SCHEMA_TEXT}"),
                })?;
            Some(Arc::new(parse_schema(text).map_err(|e| ConfigError {
                property: SCHEMA_TEXT_PROPERTY.name,
                message: e.0,
            })?))
        } else {
            None
        };
        let separator = csv_char(
            VALUE_SEPARATOR.name,
            property(VALUE_SEPARATOR.name).unwrap_or(","),
        )?;
        let quote = csv_char(
            QUOTE_CHARACTER.name,
            property(QUOTE_CHARACTER.name).unwrap_or("\""),
        )?;
        let escape = match property(ESCAPE_CHARACTER.name).unwrap_or("") {
            "" => None,
            v => Some(csv_char(ESCAPE_CHARACTER.name, v)?),
        };
        if separator == quote || escape == Some(separator) {
            return Err(ConfigError {
                property: VALUE_SEPARATOR.name,
                message: "the separator must differ from the quote and escape characters".into(),
            });
        }
        let csv = CsvFormat {
            separator,
            quote,
            escape: escape.filter(|e| *e != quote),
            header: is(FIRST_LINE_HEADER.name, "true"),
            null_string: property(NULL_STRING.name)
                .filter(|s| !s.is_empty())
                .map(str::to_string),
            include_header: !is(INCLUDE_HEADER_LINE.name, "false"),
        };
        let reader = if is("Record Reader", CSV_READER) {
            Reader::Csv(csv.clone())
        } else {
            Reader::Json
        };
        let writer = if is("Record Writer", CSV_WRITER) {
            Writer::Csv(csv)
        } else {
            Writer::Json {
                one_line_per_object: is(OUTPUT_GROUPING.name, ONE_LINE_PER_OBJECT),
            }
        };
        Ok(RecordConfig {
            reader,
            writer,
            schema,
        })
    }

    /// Reads `input`'s records.
    ///
    /// # Errors
    /// [`RecordError`]: malformed input, or a record that does not fit the schema.
    pub fn read(&self, input: &[u8]) -> Result<RecordSet, RecordError> {
        match &self.reader {
            Reader::Json => read_json(input, self.schema.as_ref()),
            Reader::Csv(format) => read_csv(input, format, self.schema.as_ref()),
        }
    }

    /// Writes `records` (of `schema`) by the writer, appending to `out`.
    pub fn write(&self, schema: &Schema, records: &[Vec<Value>], out: &mut Vec<u8>) {
        match &self.writer {
            Writer::Json {
                one_line_per_object,
            } => write_json(schema, records, *one_line_per_object, out),
            Writer::Csv(format) => write_csv(schema, records, format, out),
        }
    }

    /// The writer's `mime.type`.
    pub fn mime_type(&self) -> &'static str {
        match self.writer {
            Writer::Json { .. } => "application/json",
            Writer::Csv(_) => "text/csv",
        }
    }
}

/// The 1-based line of byte `offset` in `input`.
fn line_at(input: &[u8], offset: usize) -> u64 {
    count_newlines(&input[..offset.min(input.len())]) + 1
}

fn count_newlines(bytes: &[u8]) -> u64 {
    bytes.iter().filter(|&&b| b == b'\n').count() as u64
}

/// JsonTreeReader: the records of a JSON array of objects, or of objects one after another
/// (JSON Lines: blank lines and a last line without a newline are fine).
fn read_json(input: &[u8], schema: Option<&Arc<Schema>>) -> Result<RecordSet, RecordError> {
    let mut objects: Vec<(serde_json::Map<String, Value>, Option<u64>)> = Vec::new();
    let mut stream = serde_json::Deserializer::from_slice(input).into_iter::<Value>();
    loop {
        let start = stream.byte_offset();
        // The line where the value starts: after the whitespace before it.
        let skipped = input[start..]
            .iter()
            .take_while(|b| b.is_ascii_whitespace())
            .count();
        let line = line_at(input, start + skipped);
        let Some(next) = stream.next() else { break };
        let value = next.map_err(|e| {
            RecordError::new(
                objects.len() as u64 + 1,
                Some(e.line() as u64),
                format!("invalid JSON: {e}"),
            )
        })?;
        match value {
            Value::Object(o) => objects.push((o, Some(line))),
            Value::Array(items) => {
                for item in items {
                    match item {
                        Value::Object(o) => objects.push((o, None)),
                        other => {
                            return Err(RecordError::new(
                                objects.len() as u64 + 1,
                                None,
                                format!("{} is not a JSON object", kind_of(&other)),
                            ));
                        }
                    }
                }
            }
            other => {
                return Err(RecordError::new(
                    objects.len() as u64 + 1,
                    Some(line),
                    format!("{} is not a JSON object", kind_of(&other)),
                ));
            }
        }
    }
    let schema = match schema {
        Some(s) => Arc::clone(s),
        None => Arc::new(infer_json(objects.iter().map(|(o, _)| o))),
    };
    let mut records = Vec::with_capacity(objects.len());
    for (i, (mut object, line)) in objects.into_iter().enumerate() {
        let mut values = Vec::with_capacity(schema.fields.len());
        for field in &schema.fields {
            let value = match object.remove(&field.name) {
                None | Some(Value::Null) => field.default.clone(),
                Some(v) => convert(v, field).map_err(|message| RecordError {
                    record: i as u64 + 1,
                    line,
                    field: Some(field.name.clone()),
                    message,
                })?,
            };
            values.push(value);
        }
        records.push(values);
    }
    Ok(RecordSet { schema, records })
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// An inferred JSON schema: every name some record has, in order of first appearance;
/// values are kept as they are.
fn infer_json<'a>(objects: impl Iterator<Item = &'a serde_json::Map<String, Value>>) -> Schema {
    let mut seen = HashSet::new();
    let mut fields = Vec::new();
    for o in objects {
        for name in o.keys() {
            if seen.insert(name.as_str()) {
                fields.push(Field {
                    name: name.clone(),
                    types: vec![FieldType::Any],
                    default: Value::Null,
                });
            }
        }
    }
    Schema { fields }
}

/// CSVReader: the records of CSV `input`. Infer Schema takes the first line as the header
/// and infers each column's type; a schema text maps header names to its fields (columns
/// it lacks are dropped) or, without a header, values to its fields in order. A line with
/// fewer values leaves the rest null; one with more is an error.
fn read_csv(
    input: &[u8],
    format: &CsvFormat,
    schema: Option<&Arc<Schema>>,
) -> Result<RecordSet, RecordError> {
    let mut reader = csv::ReaderBuilder::new()
        .delimiter(format.separator)
        .quote(format.quote)
        .escape(format.escape)
        .double_quote(true)
        .has_headers(false)
        .flexible(true)
        .from_reader(input);
    let mut rows: Vec<(Vec<String>, u64)> = Vec::new();
    let mut record = csv::ByteRecord::new();
    let header_line = format.header || schema.is_none();
    let mut header: Option<Vec<String>> = None;
    loop {
        // 0 while reading the header.
        let number = if header_line && header.is_none() {
            0
        } else {
            rows.len() as u64 + 1
        };
        let more = reader.read_byte_record(&mut record).map_err(|e| {
            let line = e.position().map(csv::Position::line);
            RecordError::new(number, line, format!("invalid CSV: {e}"))
        })?;
        if !more {
            break;
        }
        let line = record.position().map_or(0, csv::Position::line);
        let mut values = Vec::with_capacity(record.len());
        for (i, bytes) in record.iter().enumerate() {
            let text = std::str::from_utf8(bytes).map_err(|e| {
                RecordError::new(
                    number,
                    Some(line),
                    format!(
                        "value {} is not valid UTF-8 (at byte {})",
                        i + 1,
                        e.valid_up_to()
                    ),
                )
            })?;
            values.push(text.to_string());
        }
        if header_line && header.is_none() {
            header = Some(values);
        } else {
            rows.push((values, line));
        }
    }
    if let Some(names) = &header {
        let mut seen = HashSet::new();
        if let Some(twice) = names.iter().find(|n| !seen.insert(n.as_str())) {
            return Err(RecordError::new(
                0,
                Some(1),
                format!("the header names `{twice}` twice"),
            ));
        }
    }
    let schema = match schema {
        Some(s) => Arc::clone(s),
        None => Arc::new(infer_csv(
            header.as_deref().unwrap_or_default(),
            &rows,
            format,
        )),
    };
    // Where each column's value goes: a schema field, or nowhere.
    let columns: Vec<Option<usize>> = match &header {
        Some(names) => {
            let index: HashMap<&str, usize> = schema
                .fields
                .iter()
                .enumerate()
                .map(|(i, f)| (f.name.as_str(), i))
                .collect();
            names
                .iter()
                .map(|n| index.get(n.as_str()).copied())
                .collect()
        }
        None => (0..schema.fields.len()).map(Some).collect(),
    };
    let mut records = Vec::with_capacity(rows.len());
    for (i, (values, line)) in rows.into_iter().enumerate() {
        let number = i as u64 + 1;
        if values.len() > columns.len() {
            return Err(RecordError::new(
                number,
                Some(line),
                format!(
                    "{} values, but the {} names {} fields",
                    values.len(),
                    if header.is_some() { "header" } else { "schema" },
                    columns.len()
                ),
            ));
        }
        let mut out: Vec<Option<Value>> = vec![None; schema.fields.len()];
        for (value, column) in values.into_iter().zip(&columns) {
            let Some(f) = *column else { continue };
            let field = &schema.fields[f];
            out[f] = Some(
                csv_value(&value, field, format).map_err(|message| RecordError {
                    record: number,
                    line: Some(line),
                    field: Some(field.name.clone()),
                    message,
                })?,
            );
        }
        records.push(
            out.into_iter()
                .zip(&schema.fields)
                .map(|(v, f)| v.unwrap_or_else(|| f.default.clone()))
                .collect(),
        );
    }
    Ok(RecordSet { schema, records })
}

/// A CSV value of `field`: the Null String is null; an empty value is `""` for a field that
/// takes text and null for any other.
fn csv_value(text: &str, field: &Field, format: &CsvFormat) -> Result<Value, String> {
    if format.null_string.as_deref() == Some(text) {
        return Ok(Value::Null);
    }
    if text.is_empty()
        && !field
            .types
            .iter()
            .any(|t| matches!(t, FieldType::String | FieldType::Any))
    {
        return Ok(Value::Null);
    }
    convert_text(text, field)
}

/// The type a CSV column's values all have: `int` or `long` (whole numbers without leading
/// zeros), `double`, `boolean`, else `string`; empty values and the Null String do not count
/// (they are null, or `""` in a string column).
fn infer_csv(names: &[String], rows: &[(Vec<String>, u64)], format: &CsvFormat) -> Schema {
    let fields = names
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let values = rows
                .iter()
                .filter_map(|(r, _)| r.get(i))
                .map(String::as_str)
                .filter(|v| !v.is_empty() && format.null_string.as_deref() != Some(*v));
            Field {
                name: name.clone(),
                types: vec![infer_column(values)],
                default: Value::Null,
            }
        })
        .collect();
    Schema { fields }
}

fn infer_column<'a>(values: impl Iterator<Item = &'a str>) -> FieldType {
    let (mut int, mut long, mut double, mut boolean, mut any) = (true, true, true, true, false);
    for v in values {
        any = true;
        let digits = v.strip_prefix('-').unwrap_or(v);
        let plain_integer = !digits.is_empty()
            && digits.bytes().all(|b| b.is_ascii_digit())
            && (digits == "0" || !digits.starts_with('0'));
        int &= plain_integer && v.parse::<i32>().is_ok();
        long &= plain_integer && v.parse::<i64>().is_ok();
        double &= parse_finite(v).is_some()
            && !(digits.starts_with('0') && digits.len() > 1 && !digits.starts_with("0."));
        boolean &= v.eq_ignore_ascii_case("true") || v.eq_ignore_ascii_case("false");
        if !(int || long || double || boolean) {
            return FieldType::String;
        }
    }
    match () {
        _ if !any => FieldType::String,
        _ if int => FieldType::Int,
        _ if long => FieldType::Long,
        _ if double => FieldType::Double,
        _ if boolean => FieldType::Boolean,
        _ => FieldType::String,
    }
}

/// JsonRecordSetWriter: each record an object of its fields in the schema's order (nulls
/// written), in one array or one per line (each line ended by a newline).
fn write_json(
    schema: &Schema,
    records: &[Vec<Value>],
    one_line_per_object: bool,
    out: &mut Vec<u8>,
) {
    if !one_line_per_object {
        out.push(b'[');
    }
    for (i, record) in records.iter().enumerate() {
        if i > 0 && !one_line_per_object {
            out.push(b',');
        }
        out.push(b'{');
        for (j, (field, value)) in schema.fields.iter().zip(record).enumerate() {
            if j > 0 {
                out.push(b',');
            }
            // Writing to a vector cannot fail, and a string or value always serializes.
            let _ = serde_json::to_writer(&mut *out, &field.name);
            out.push(b':');
            let _ = serde_json::to_writer(&mut *out, value);
        }
        out.push(b'}');
        if one_line_per_object {
            out.push(b'\n');
        }
    }
    if !one_line_per_object {
        out.push(b']');
    }
}

/// CSVRecordSetWriter: the header (with Include Header Line), then a line per record,
/// each ended by a newline. A value is quoted when it holds the separator, the quote or
/// escape character, or a line break, and an empty string is written `""` (a null is empty,
/// or the Null String).
fn write_csv(schema: &Schema, records: &[Vec<Value>], format: &CsvFormat, out: &mut Vec<u8>) {
    if format.include_header && !schema.fields.is_empty() {
        for (i, field) in schema.fields.iter().enumerate() {
            if i > 0 {
                out.push(format.separator);
            }
            write_csv_text(&field.name, field.name.is_empty(), format, out);
        }
        out.push(b'\n');
    }
    for record in records {
        for (i, value) in record.iter().enumerate() {
            if i > 0 {
                out.push(format.separator);
            }
            match value {
                Value::Null => match &format.null_string {
                    Some(null) => write_csv_text(null, false, format, out),
                    // A line of one empty value would be a blank line, which readers skip:
                    // quoted, it stays a record (read back as `""`, or null for a
                    // non-text field).
                    None if record.len() == 1 => out.extend_from_slice(&[format.quote; 2]),
                    None => {}
                },
                Value::String(s) => write_csv_text(s, s.is_empty(), format, out),
                Value::Bool(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
                Value::Number(n) => out.extend_from_slice(n.to_string().as_bytes()),
                nested => write_csv_text(&nested.to_string(), false, format, out),
            }
        }
        out.push(b'\n');
    }
}

fn write_csv_text(text: &str, force_quotes: bool, format: &CsvFormat, out: &mut Vec<u8>) {
    let needs_quotes = force_quotes
        || text.bytes().any(|b| {
            b == format.separator
                || b == format.quote
                || b == b'\n'
                || b == b'\r'
                || Some(b) == format.escape
        });
    if !needs_quotes {
        out.extend_from_slice(text.as_bytes());
        return;
    }
    out.push(format.quote);
    for &b in text.as_bytes() {
        if b == format.quote || Some(b) == format.escape {
            out.push(format.escape.unwrap_or(format.quote));
        }
        out.push(b);
    }
    out.push(format.quote);
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    /// `props` over the defaults of ConvertRecord's spec, as validation gives them.
    fn property<'a>(props: &'a [(&str, &'a str)], name: &str) -> Option<&'a str> {
        props
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| *v)
            .or_else(|| crate::spec::spec("ConvertRecord")?.property(name)?.default)
    }

    fn config(props: &[(&str, &str)]) -> RecordConfig {
        RecordConfig::from_properties(|name| property(props, name)).unwrap()
    }

    fn convert_text_with(props: &[(&str, &str)], input: &str) -> Result<String, RecordError> {
        let c = config(props);
        let set = c.read(input.as_bytes())?;
        let mut out = Vec::new();
        c.write(&set.schema, &set.records, &mut out);
        Ok(String::from_utf8(out).unwrap())
    }

    const CSV_TO_JSON: &[(&str, &str)] = &[
        ("Record Reader", CSV_READER),
        ("Record Writer", JSON_WRITER),
    ];
    const JSON_TO_CSV: &[(&str, &str)] = &[
        ("Record Reader", JSON_READER),
        ("Record Writer", CSV_WRITER),
    ];

    #[test]
    fn csv_with_inferred_types_becomes_json() {
        let out = convert_text_with(
            CSV_TO_JSON,
            "id,name,score,ok,zip\n1,\"Ann, B\",2.5,true,007\n2,,,FALSE,010\n",
        )
        .unwrap();
        assert_eq!(
            out,
            r#"[{"id":1,"name":"Ann, B","score":2.5,"ok":true,"zip":"007"},{"id":2,"name":"","score":null,"ok":false,"zip":"010"}]"#
        );
    }

    #[test]
    fn boundaries_of_csv_input() {
        // Empty, header only, no trailing newline, CRLF, blank lines.
        assert_eq!(convert_text_with(CSV_TO_JSON, "").unwrap(), "[]");
        assert_eq!(convert_text_with(CSV_TO_JSON, "a,b\n").unwrap(), "[]");
        assert_eq!(
            convert_text_with(CSV_TO_JSON, "a,b\r\n1,x").unwrap(),
            r#"[{"a":1,"b":"x"}]"#
        );
        assert_eq!(
            convert_text_with(CSV_TO_JSON, "a\n\n1\n\n2\n").unwrap(),
            r#"[{"a":1},{"a":2}]"#
        );
        // A short line leaves the rest null; a long one is an error naming it.
        assert_eq!(
            convert_text_with(CSV_TO_JSON, "a,b,c\n1\n").unwrap(),
            r#"[{"a":1,"b":null,"c":null}]"#
        );
        let e = convert_text_with(CSV_TO_JSON, "a,b\n1,2\n3,4,5\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "record 2 (line 3): 3 values, but the header names 2 fields"
        );
        // Invalid UTF-8, with its position.
        let e = config(CSV_TO_JSON)
            .read(b"a,b\nok,x\nbad,\xff\xfe\n")
            .unwrap_err();
        assert_eq!((e.record, e.line), (2, Some(3)));
        assert!(e.message.contains("UTF-8"), "{e}");
        let e = config(CSV_TO_JSON).read(b"a,a\n1,2\n").unwrap_err();
        assert_eq!(e.to_string(), "header (line 1): the header names `a` twice");
    }

    #[test]
    fn boundaries_of_json_input() {
        let to_csv = |input: &str| convert_text_with(JSON_TO_CSV, input);
        assert_eq!(to_csv("").unwrap(), "");
        assert_eq!(to_csv("[]").unwrap(), "");
        // JSON Lines with blank lines and no final newline; a field first seen later.
        assert_eq!(
            to_csv("{\"a\":1}\n\n  \n{\"a\":\"x,y\",\"b\":[1,2]}").unwrap(),
            "a,b\n1,\n\"x,y\",\"[1,2]\"\n"
        );
        let e = to_csv("{\"a\":1}\n{\"a\":\n").unwrap_err();
        assert_eq!(e.record, 2);
        assert!(
            e.to_string().starts_with("record 2 (line 3): invalid JSON"),
            "{e}"
        );
        let e = to_csv("{\"a\":1}\n\n42\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "record 2 (line 3): a number is not a JSON object"
        );
        let e = to_csv("[{\"a\":1}, \"x\"]").unwrap_err();
        assert_eq!(e.to_string(), "record 2: a string is not a JSON object");
        assert!(config(JSON_TO_CSV).read(b"{\"a\":\"\xff\"}").is_err());
    }

    #[test]
    fn a_schema_converts_types_and_names_the_misfit() {
        let schema = r#"{"type":"record","name":"r","fields":[
            {"name":"id","type":"int"},
            {"name":"big","type":["null","long"]},
            {"name":"score","type":"double"},
            {"name":"ok","type":"boolean","default":false},
            {"name":"color","type":{"type":"enum","name":"c","symbols":["red","blue"]}},
            {"name":"note","type":["null","string"]}]}"#;
        let props = [
            ("Record Reader", JSON_READER),
            ("Record Writer", JSON_WRITER),
            ("Schema Access Strategy", SCHEMA_TEXT),
            ("Schema Text", schema),
            ("Output Grouping", ONE_LINE_PER_OBJECT),
        ];
        let out = convert_text_with(
            &props,
            r#"{"id":"7","big":9007199254740993,"score":1,"color":"red","note":5,"extra":1}"#,
        )
        .unwrap();
        assert_eq!(
            out,
            "{\"id\":7,\"big\":9007199254740993,\"score\":1,\"ok\":false,\"color\":\"red\",\"note\":\"5\"}\n"
        );
        for (input, message) in [
            (
                r#"{"id":3000000000}"#,
                "record 1 (line 1), field `id`: 3000000000 does not fit type int",
            ),
            (
                r#"{"id":1.5}"#,
                "record 1 (line 1), field `id`: 1.5 does not fit type int",
            ),
            (
                r#"{"id":"x"}"#,
                "record 1 (line 1), field `id`: \"x\" does not fit type int",
            ),
            (
                r#"{"id":1,"color":"green"}"#,
                "record 1 (line 1), field `color`: \"green\" does not fit type enum [\"red\", \"blue\"]",
            ),
            (
                r#"{"id":1,"note":{"a":1}}"#,
                "record 1 (line 1), field `note`: {\"a\":1} does not fit type string",
            ),
        ] {
            assert_eq!(
                convert_text_with(&props, input).unwrap_err().to_string(),
                message
            );
        }
    }

    #[test]
    fn bad_schemas_and_characters_name_their_property() {
        let err = |props: &[(&str, &str)]| {
            RecordConfig::from_properties(|name| property(props, name))
                .unwrap_err()
                .to_string()
        };
        let strategy = ("Schema Access Strategy", SCHEMA_TEXT);
        assert!(err(&[strategy]).starts_with("Schema Text: required"));
        assert!(err(&[strategy, ("Schema Text", "{")]).starts_with("Schema Text: not JSON"));
        assert!(
            err(&[strategy, ("Schema Text", r#"{"type":"string"}"#)])
                .contains("must be an Avro record")
        );
        assert_eq!(
            err(&[
                strategy,
                (
                    "Schema Text",
                    r#"{"type":"record","fields":[{"name":"a","type":"decimal"}]}"#
                )
            ]),
            "Schema Text: field `a`: unknown type `decimal`"
        );
        assert_eq!(
            err(&[
                strategy,
                (
                    "Schema Text",
                    r#"{"type":"record","fields":[{"name":"a","type":"int"},{"name":"a","type":"int"}]}"#
                )
            ]),
            "Schema Text: field `a` is named twice"
        );
        assert!(
            err(&[("Value Separator", ";;")])
                .starts_with("Value Separator: `;;` is not one ASCII character")
        );
        assert!(err(&[("Quote Character", "«")]).starts_with("Quote Character:"));
    }

    #[test]
    fn escapes_and_separators_are_written_so_they_read_back() {
        let c = config(&[
            ("Record Reader", CSV_READER),
            ("Record Writer", CSV_WRITER),
            ("Value Separator", "\\t"),
        ]);
        let set = c.read(b"a\tb\n\"x\\\"y\"\t\"back\\\\slash\"\n").unwrap();
        assert_eq!(set.records, vec![vec![json!("x\"y"), json!("back\\slash")]]);
        let mut out = Vec::new();
        c.write(&set.schema, &set.records, &mut out);
        assert_eq!(out, b"a\tb\n\"x\\\"y\"\t\"back\\\\slash\"\n");
    }

    /// A text value: quotes, separators, escapes, line breaks, spaces, multi-byte UTF-8.
    fn text() -> impl Strategy<Value = String> {
        proptest::collection::vec(
            prop_oneof![
                Just("\"".to_string()),
                Just(",".to_string()),
                Just(";".to_string()),
                Just("\t".to_string()),
                Just("\\".to_string()),
                Just("\n".to_string()),
                Just("\r\n".to_string()),
                Just(" ".to_string()),
                Just("'".to_string()),
                "[a-z0-9]{1,3}",
                "\\PC{1,2}",
            ],
            0..6,
        )
        .prop_map(|parts| parts.concat())
    }

    fn dialect() -> impl Strategy<Value = (&'static str, &'static str, &'static str)> {
        (
            prop_oneof![Just(","), Just(";"), Just("\\t"), Just("|")],
            prop_oneof![Just("\""), Just("'")],
            prop_oneof![Just("\\"), Just("")],
        )
    }

    proptest! {
        /// JSON Lines → CSV → JSON gives the records back, whatever the text and dialect:
        /// with a Null String, nulls stay nulls; without one, a null string is read back
        /// as `""` (CSV cannot tell them apart).
        #[test]
        fn json_to_csv_to_json_round_trips(
            rows in proptest::collection::vec((proptest::option::of(text()), proptest::option::of(text()), proptest::option::of(any::<i64>()), proptest::option::of(any::<bool>())), 0..8),
            (separator, quote, escape) in dialect(),
            null_string in prop_oneof![Just(None), Just(Some("\\N"))],
        ) {
            let schema = r#"{"type":"record","name":"r","fields":[
                {"name":"s","type":["null","string"]},{"name":"t","type":["null","string"]},
                {"name":"n","type":["null","long"]},{"name":"b","type":["null","boolean"]}]}"#;
            let mut props = vec![
                ("Schema Access Strategy", SCHEMA_TEXT),
                ("Schema Text", schema),
                ("Value Separator", separator),
                ("Quote Character", quote),
                ("Escape Character", escape),
                ("Treat First Line as Header", "true"),
            ];
            if let Some(n) = null_string {
                props.push(("Null String", n));
            }
            let with = |reader, writer| {
                let mut p = props.clone();
                p.push(("Record Reader", reader));
                p.push(("Record Writer", writer));
                p.push(("Output Grouping", ONE_LINE_PER_OBJECT));
                config(&p)
            };
            let lines: String = rows
                .iter()
                .map(|(s, t, n, b)| json!({"s": s, "t": t, "n": n, "b": b}).to_string() + "\n")
                .collect();
            let to_csv = with(JSON_READER, CSV_WRITER);
            let set = to_csv.read(lines.as_bytes()).unwrap();
            let mut csv = Vec::new();
            to_csv.write(&set.schema, &set.records, &mut csv);
            let to_json = with(CSV_READER, JSON_WRITER);
            let back = to_json.read(&csv).unwrap();
            let expected: Vec<Vec<Value>> = rows
                .iter()
                .map(|(s, t, n, b)| {
                    let text = |v: &Option<String>| match (v, null_string) {
                        (Some(v), Some(null)) if v == null => Value::Null,
                        (None, None) => json!(""),
                        (v, _) => json!(v),
                    };
                    vec![text(s), text(t), json!(n), json!(b)]
                })
                .collect();
            prop_assert_eq!(back.records, expected, "CSV: {:?}", String::from_utf8_lossy(&csv));
        }

        /// CSV written by the writer reads back to the same values with the types inferred.
        #[test]
        fn inferred_csv_round_trips_through_json(
            rows in proptest::collection::vec((any::<i32>(), "[a-zA-Z \"',\\n]{0,8}"), 1..8),
        ) {
            let json_lines: String = rows
                .iter()
                .map(|(n, s)| json!({"n": n, "s": format!("x{s}")}).to_string() + "\n")
                .collect();
            let to_csv = config(JSON_TO_CSV);
            let set = to_csv.read(json_lines.as_bytes()).unwrap();
            let mut csv = Vec::new();
            to_csv.write(&set.schema, &set.records, &mut csv);
            let back = config(CSV_TO_JSON).read(&csv).unwrap();
            prop_assert_eq!(back.records, set.records);
            prop_assert_eq!(&back.schema.fields[0].types, &vec![FieldType::Int]);
        }
    }
}
