//! ControlRate: its spec, its processor (with its throttles) and its unit tests.

use super::spec::{Dynamic, K, ProcessorSpec, p};
use super::{BuildError, BuiltIn, Problem, ProcessError, Processor, Trigger, props};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use weir_flow_api::component::Component;
use weir_flow_api::flowfile::SmolStr;
use weir_flow_api::provenance::EventType;
use weir_flow_api::session::{FlowFileRef, Session};
use weir_flow_api::units::parse_size;

/// The ControlRate type: what it accepts and how it is built.
pub(super) static BUILT_IN: BuiltIn = BuiltIn {
    spec: &SPEC,
    build: |c| Ok(Arc::new(ControlRate::new(c)?)),
};

const DATA_RATE: &str = "data rate";
const FLOWFILE_RATE: &str = "flowfile count";
const ATTRIBUTE_RATE: &str = "attribute value";
const DATA_OR_FLOWFILE_RATE: &str = "data rate or flowfile count";
const HOLD: &str = "Hold FlowFile";
const ROUTE_EXCEEDED: &str = "Route to 'rate exceeded'";
const RATE_EXCEEDED: &str = "rate exceeded";

static SPEC: ProcessorSpec = ProcessorSpec {
    kind: "ControlRate",
    description: "Lets flow files through at no more than a maximum rate (bytes, flow files or an attribute's sum per time duration), holding the rest in the queue.",
    properties: &[
        p(
            "Rate Control Criteria",
            true,
            Some(DATA_RATE),
            K::Choice(&[DATA_RATE, FLOWFILE_RATE, ATTRIBUTE_RATE, DATA_OR_FLOWFILE_RATE]),
        )
        .about("What counts toward the rate: content bytes, flow files, the sum of an attribute, or bytes and flow files both."),
        p("Time Duration", true, Some("1 min"), K::Duration)
            .about("The time the maximum rate pertains to (at least 1 sec)."),
        p("Maximum Rate", false, None, K::Text)
            .about("The most per Time Duration: a size (`1 MB`) for data rate, a positive whole number otherwise."),
        p("Maximum Data Rate", false, None, K::Size)
            .about("The most bytes per Time Duration, for `data rate or flowfile count`."),
        p("Maximum FlowFile Rate", false, None, K::Count)
            .about("The most flow files per Time Duration, for `data rate or flowfile count`."),
        p("Rate Exceeded Strategy", true, Some(HOLD), K::Choice(&[HOLD, ROUTE_EXCEEDED]))
            .about("Hold flow files over the rate in the queue until it allows them, or route them to `rate exceeded`."),
        p("Rate Controlled Attribute", false, None, K::Text)
            .about("For `attribute value`: the attribute whose positive whole-number values count toward the rate."),
        p("Grouping Attribute", false, None, K::Text)
            .about("A separate rate for each value of this attribute; without it, one rate for all."),
    ],
    relationships: &["success", "failure"],
    dynamic: Dynamic::None,
    source: false,
};

/// `success` and `failure`, with `rate exceeded` when flow files over the rate are routed.
pub(super) fn relationships(properties: &BTreeMap<String, String>) -> Vec<String> {
    let mut out = vec!["success".to_string(), "failure".to_string()];
    if properties
        .get("Rate Exceeded Strategy")
        .is_some_and(|s| s.eq_ignore_ascii_case(ROUTE_EXCEEDED))
    {
        out.push(RATE_EXCEEDED.into());
    }
    out
}

/// A positive whole number as NiFi's `0*[1-9][0-9]*` reads it.
fn positive(text: &str) -> Option<u64> {
    let text = text.trim();
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse::<u64>().ok().filter(|&n| n > 0)
}

/// Checks the rates the criteria needs, and the time duration's floor.
pub(super) fn validate(properties: &BTreeMap<String, String>) -> Vec<Problem> {
    let get = |name: &str| properties.get(name).map(String::as_str);
    let mut problems = Vec::new();
    let need_count = |name: &str, problems: &mut Vec<Problem>| match get(name) {
        Some(v) if positive(v).is_some() => {}
        Some(v) => problems.push(Problem::new(
            name,
            format!("`{v}` is not a positive whole number"),
        )),
        None => problems.push(Problem::new(name, "required by this Rate Control Criteria")),
    };
    let criteria = get("Rate Control Criteria")
        .unwrap_or(DATA_RATE)
        .to_ascii_lowercase();
    match criteria.as_str() {
        DATA_RATE => match get("Maximum Rate") {
            Some(v) => {
                if let Err(e) = parse_size(v) {
                    problems.push(Problem::new("Maximum Rate", e.to_string()));
                }
            }
            None => problems.push(Problem::new(
                "Maximum Rate",
                "required by this Rate Control Criteria",
            )),
        },
        DATA_OR_FLOWFILE_RATE => {
            if get("Maximum Data Rate").is_none() {
                problems.push(Problem::new(
                    "Maximum Data Rate",
                    "required by this Rate Control Criteria",
                ));
            }
            need_count("Maximum FlowFile Rate", &mut problems);
        }
        other => {
            if other == ATTRIBUTE_RATE
                && get("Rate Controlled Attribute").is_none_or(|a| a.trim().is_empty())
            {
                problems.push(Problem::new(
                    "Rate Controlled Attribute",
                    "required when Rate Control Criteria is `attribute value`",
                ));
            }
            need_count("Maximum Rate", &mut problems);
        }
    }
    if let Some(Ok(period)) = get("Time Duration").map(weir_flow_api::units::parse_duration)
        && period < Duration::from_secs(1)
    {
        problems.push(Problem::new("Time Duration", "must be at least 1 sec"));
    }
    problems
}

/// One rate: what passed within the last period, and NiFi's penalty for overshooting.
#[derive(Debug)]
struct Throttle {
    max: u64,
    period: Duration,
    /// What passed, oldest first, with when.
    passed: VecDeque<(Instant, u64)>,
    sum: u64,
    /// The flow file that took the sum over the maximum earned the throttle this long
    /// closed, starting at the next offer.
    penalty: Duration,
    closed_until: Option<Instant>,
    last_used: Instant,
}

impl Throttle {
    fn new(max: u64, period: Duration, now: Instant) -> Throttle {
        Throttle {
            max,
            period,
            passed: VecDeque::new(),
            sum: 0,
            penalty: Duration::ZERO,
            closed_until: None,
            last_used: now,
        }
    }

    fn expire(&mut self, now: Instant) {
        while let Some(&(at, amount)) = self.passed.front() {
            if now.duration_since(at) < self.period {
                break;
            }
            self.sum -= amount;
            self.passed.pop_front();
        }
    }

    /// Lets `amount` through at `now` if the rate allows it (NiFi's `tryAdd`): the sum of
    /// the period must be under the maximum, and one flow file may take it over, closing
    /// the throttle for as long as sending the excess at the maximum rate would take.
    fn offer(&mut self, amount: u64, now: Instant) -> bool {
        if self.closed_until.is_some_and(|until| until > now) {
            return false;
        }
        self.expire(now);
        if self.sum >= self.max {
            return false;
        }
        if !self.penalty.is_zero() {
            self.closed_until = Some(now + self.penalty);
            self.penalty = Duration::ZERO;
            return false;
        }
        self.passed.push_back((now, amount));
        self.sum += amount;
        if self.sum > self.max {
            let over = (self.sum - self.max) as f64 / self.max as f64;
            self.penalty = self.period.mul_f64(over);
        }
        self.last_used = now;
        true
    }

    /// How long from `now` until an offer could pass.
    fn opens_in(&mut self, now: Instant) -> Duration {
        if let Some(until) = self.closed_until
            && until > now
        {
            return until - now;
        }
        if !self.penalty.is_zero() {
            return self.penalty;
        }
        self.expire(now);
        let mut sum = self.sum;
        for &(at, amount) in &self.passed {
            if sum < self.max {
                break;
            }
            sum -= amount;
            if sum < self.max {
                return (at + self.period).saturating_duration_since(now);
            }
        }
        Duration::ZERO
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Criteria {
    Data,
    Count,
    Attribute,
    DataOrCount,
}

/// The throttles of each group (data and count, as the criteria needs).
#[derive(Default)]
struct Throttles {
    data: HashMap<String, Throttle>,
    count: HashMap<String, Throttle>,
    last_cleared: Option<Instant>,
}

/// ControlRate: lets flow files through at a maximum rate per group.
pub struct ControlRate {
    criteria: Criteria,
    period: Duration,
    max_data: u64,
    max_count: u64,
    attribute: String,
    grouping: Option<String>,
    route_exceeded: bool,
    throttles: Mutex<Throttles>,
}

/// As NiFi: most flow files one trigger looks at.
const BATCH: usize = 1000;

/// A flow file's verdict.
enum Verdict {
    Pass,
    Over(Duration),
    Invalid,
}

impl ControlRate {
    pub(super) fn new(c: &Component) -> Result<Self, BuildError> {
        let criteria = match props::text(c, "Rate Control Criteria")
            .to_ascii_lowercase()
            .as_str()
        {
            FLOWFILE_RATE => Criteria::Count,
            ATTRIBUTE_RATE => Criteria::Attribute,
            DATA_OR_FLOWFILE_RATE => Criteria::DataOrCount,
            _ => Criteria::Data,
        };
        let rate = props::text(c, "Maximum Rate");
        let (max_data, max_count) = match criteria {
            Criteria::Data => (
                parse_size(&rate).map_err(|e| format!("Maximum Rate: {e}"))?,
                0,
            ),
            Criteria::Count | Criteria::Attribute => (
                0,
                positive(&rate).ok_or("Maximum Rate must be a positive whole number")?,
            ),
            Criteria::DataOrCount => (
                props::size(c, "Maximum Data Rate")?,
                props::count(c, "Maximum FlowFile Rate")?.max(1),
            ),
        };
        Ok(ControlRate {
            criteria,
            period: props::duration(c, "Time Duration")?.max(Duration::from_secs(1)),
            max_data,
            max_count,
            attribute: props::text(c, "Rate Controlled Attribute"),
            grouping: props::opt(c, "Grouping Attribute").filter(|g| !g.is_empty()),
            route_exceeded: props::text(c, "Rate Exceeded Strategy")
                .eq_ignore_ascii_case(ROUTE_EXCEEDED),
            throttles: Mutex::new(Throttles::default()),
        })
    }

    /// Whether `ff` may pass now; counts it if so.
    fn judge(
        &self,
        throttles: &mut Throttles,
        session: &dyn Session,
        ff: FlowFileRef,
        now: Instant,
    ) -> Verdict {
        let flowfile = session.flowfile(ff);
        let count = match self.criteria {
            Criteria::Attribute => match flowfile
                .attribute(&self.attribute)
                .and_then(|v| positive(&v))
            {
                Some(n) => n,
                None => return Verdict::Invalid,
            },
            _ => 1,
        };
        let group = self
            .grouping
            .as_ref()
            .and_then(|g| flowfile.attribute(g))
            .map_or_else(String::new, |g| g.into_owned());
        if matches!(self.criteria, Criteria::Data | Criteria::DataOrCount) {
            let throttle = throttles
                .data
                .entry(group.clone())
                .or_insert_with(|| Throttle::new(self.max_data, self.period, now));
            if !throttle.offer(flowfile.size(), now) {
                return Verdict::Over(throttle.opens_in(now));
            }
        }
        if self.criteria != Criteria::Data {
            let throttle = throttles
                .count
                .entry(group)
                .or_insert_with(|| Throttle::new(self.max_count, self.period, now));
            if !throttle.offer(count, now) {
                return Verdict::Over(throttle.opens_in(now));
            }
        }
        Verdict::Pass
    }
}

impl Processor for ControlRate {
    fn trigger(&self, session: &mut dyn Session) -> Result<Trigger, ProcessError> {
        let now = Instant::now();
        let mut throttles = self.throttles.lock().unwrap_or_else(|e| e.into_inner());
        // Throttles unused for two periods go (NiFi clears them likewise).
        if throttles
            .last_cleared
            .is_none_or(|at| now.duration_since(at) > 2 * self.period)
        {
            let horizon = 2 * self.period;
            throttles
                .data
                .retain(|_, t| now.duration_since(t.last_used) <= horizon);
            throttles
                .count
                .retain(|_, t| now.duration_since(t.last_used) <= horizon);
            throttles.last_cleared = Some(now);
        }
        let mut moved = 0;
        let mut held = 0;
        let mut opens_in: Option<Duration> = None;
        for _ in 0..BATCH {
            let Some(ff) = session.get()? else { break };
            match self.judge(&mut throttles, session, ff, now) {
                Verdict::Pass => {
                    moved += 1;
                    session.transfer(ff, "success")?;
                    if self.route_exceeded {
                        session.report(
                            ff,
                            EventType::ROUTE,
                            None,
                            Some(SmolStr::new_static("success")),
                        );
                    }
                }
                Verdict::Invalid => {
                    moved += 1;
                    tracing::warn!(
                        flowfile = %session.flowfile(ff).uuid(),
                        attribute = %self.attribute,
                        "ControlRate: missing or invalid rate attribute; routed to failure"
                    );
                    session.transfer(ff, "failure")?;
                }
                Verdict::Over(_) if self.route_exceeded => {
                    moved += 1;
                    let rel = SmolStr::new_static(RATE_EXCEEDED);
                    session.report(ff, EventType::ROUTE, None, Some(rel.clone()));
                    session.transfer(ff, &rel)?;
                }
                Verdict::Over(wait) => {
                    held += 1;
                    session.give_back(ff);
                    opens_in = Some(opens_in.map_or(wait, |w| w.min(wait)));
                    // One rate for all: nothing behind this one can pass either.
                    if self.grouping.is_none() {
                        break;
                    }
                }
            }
        }
        Ok(if moved > 0 {
            Trigger::Worked
        } else if held > 0 {
            // Rest until the earliest throttle opens (at least a millisecond).
            Trigger::Yield(opens_in.unwrap_or_default().max(Duration::from_millis(1)))
        } else {
            Trigger::Idle
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_throttle_lets_the_maximum_through_per_period() {
        let start = Instant::now();
        let mut t = Throttle::new(3, Duration::from_secs(10), start);
        assert!(t.offer(1, start));
        assert!(t.offer(1, start));
        assert!(t.offer(1, start));
        assert!(!t.offer(1, start));
        assert_eq!(t.opens_in(start), Duration::from_secs(10));
        let later = start + Duration::from_secs(10);
        assert_eq!(t.opens_in(later), Duration::ZERO);
        assert!(t.offer(1, later), "the window moved on");
    }

    #[test]
    fn overshooting_closes_the_throttle_for_the_excess() {
        let start = Instant::now();
        let mut t = Throttle::new(100, Duration::from_secs(10), start);
        assert!(t.offer(150, start), "one flow file may take the sum over");
        assert!(!t.offer(1, start));
        let after = start + Duration::from_secs(10);
        // The window is empty again, but the 50 over cost half a period.
        assert!(!t.offer(1, after));
        assert_eq!(t.opens_in(after), Duration::from_secs(5));
        assert!(!t.offer(1, after + Duration::from_secs(4)));
        assert!(t.offer(1, after + Duration::from_secs(5)));
    }

    #[test]
    fn validation_wants_the_rate_the_criteria_needs() {
        let props = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            let mut m: BTreeMap<String, String> = SPEC
                .properties
                .iter()
                .filter_map(|p| p.default.map(|d| (p.name.to_string(), d.to_string())))
                .collect();
            m.extend(pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())));
            m
        };
        assert_eq!(validate(&props(&[]))[0].property, "Maximum Rate");
        assert!(validate(&props(&[("Maximum Rate", "1 MB")])).is_empty());
        let count = props(&[
            ("Rate Control Criteria", FLOWFILE_RATE),
            ("Maximum Rate", "1 MB"),
        ]);
        assert_eq!(validate(&count)[0].property, "Maximum Rate");
        let zero = props(&[
            ("Rate Control Criteria", FLOWFILE_RATE),
            ("Maximum Rate", "0"),
        ]);
        assert_eq!(validate(&zero)[0].property, "Maximum Rate");
        let attribute = props(&[
            ("Rate Control Criteria", ATTRIBUTE_RATE),
            ("Maximum Rate", "5"),
        ]);
        assert_eq!(
            validate(&attribute)[0].property,
            "Rate Controlled Attribute"
        );
        let short = props(&[("Maximum Rate", "1 MB"), ("Time Duration", "10 ms")]);
        assert_eq!(validate(&short)[0].property, "Time Duration");
        let both = props(&[
            ("Rate Control Criteria", DATA_OR_FLOWFILE_RATE),
            ("Maximum Data Rate", "1 KB"),
        ]);
        assert_eq!(validate(&both)[0].property, "Maximum FlowFile Rate");
        assert_eq!(
            relationships(&props(&[("Rate Exceeded Strategy", ROUTE_EXCEEDED)])),
            ["success", "failure", "rate exceeded"]
        );
    }

    #[test]
    fn positive_numbers_are_read_as_nifi_reads_them() {
        assert_eq!(positive("007"), Some(7));
        assert_eq!(positive("0"), None);
        assert_eq!(positive("-3"), None);
        assert_eq!(positive("1.5"), None);
        assert_eq!(positive(""), None);
    }
}
