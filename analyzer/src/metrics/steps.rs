//! Collective steps and the flows that hold them back (docs/METRICS.md, "Collective steps
//! and stragglers"), found on the stats side from the transmissions the workers end:
//!
//! - a **job** is the hosts of a `--job NAME=CIDR[,CIDR…]` rule, with the request flows
//!   between them; the hosts no rule names are grouped by their own RC request traffic
//!   (not on a connection that carries NVMe), one job per connected group, named once, by the lowest address among the
//!   hosts of its first step, whenever that step closes (`Steps::record`); two named groups
//!   that a flow joins are one job under the name of the earlier first step
//!   (`Steps::join`). A flow between a rule's host and a host outside that rule is in no
//!   job (counted);
//! - a **step** of a job is the union of its request flows' transmissions (at the compute
//!   vantage) that overlap or follow each other by at most `--step-gap`;
//! - its **straggler** is the flow that finished last; its lag, how long after the median
//!   flow's finish; its reason, what its packets show: loss (retransmissions, PSN gaps), NAKs
//!   on the direction answering it, congestion (CNPs, ECN-CE), or none of them.
//!
//! Transmissions reach the stats side in batches, in no particular order across flows and
//! workers, at most two flow-idle times and an interval after they end. A step is therefore
//! closed once every worker has reported an interval that ends that long after it (see
//! [`super::totals::Progress`]); at the end of the run every step is closed.

use crate::track::{FlowKey, Transmission, Vantage};
use hdrhistogram::Histogram;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::net::IpAddr;

/// Transmissions waiting for their step to close; beyond it, each job's oldest steps close
/// early (see [`Steps::close_oldest`]). Also the bound on the NAK-carrying transmissions
/// kept (beyond it the oldest go).
const MAX_PENDING: usize = 262_144;
/// Hosts in jobs; beyond it, the transmissions of new hosts are not analysed (counted).
pub const MAX_HOSTS: usize = 65_536;

/// `--job NAME=CIDR[,CIDR…]`: the hosts of a job, named by the operator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobRule {
    pub name: String,
    pub nets: Vec<(IpAddr, u8)>,
}

impl JobRule {
    fn contains(&self, ip: IpAddr) -> bool {
        self.nets.iter().any(|&(net, len)| in_net(ip, net, len))
    }
}

/// The first `len` bits of `ip`.
fn network(ip: IpAddr, len: u8) -> IpAddr {
    match ip {
        IpAddr::V4(a) => {
            let mask = if len == 0 { 0 } else { u32::MAX << (32 - u32::from(len.min(32))) };
            IpAddr::V4((u32::from(a) & mask).into())
        }
        IpAddr::V6(a) => {
            let mask = if len == 0 { 0 } else { u128::MAX << (128 - u32::from(len.min(128))) };
            IpAddr::V6((u128::from(a) & mask).into())
        }
    }
}

fn in_net(ip: IpAddr, net: IpAddr, len: u8) -> bool {
    ip.is_ipv4() == net.is_ipv4() && network(ip, len) == network(net, len)
}

impl std::str::FromStr for JobRule {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let (name, nets) = s.split_once('=').ok_or_else(|| format!("'{s}' is not NAME=CIDR[,CIDR...]"))?;
        if name.is_empty() || name.len() > 64 || name.chars().any(|c| c.is_control() || c == ',') {
            return Err(format!("'{name}' is not a job name (1 to 64 printable characters, no comma)"));
        }
        // `llm ` and `llm` would be two jobs that look like one.
        if name.trim() != name {
            return Err(format!("'{name}' is not a job name (it begins or ends with a space)"));
        }
        // A job found by itself is named by one of its addresses: a rule of that name would
        // be taken for it (and merged with it).
        if name.parse::<IpAddr>().is_ok() {
            return Err(format!("'{name}' is not a job name (an address names a job found by itself)"));
        }
        let nets = nets
            .split(',')
            .map(|n| {
                let (ip, len) = match n.split_once('/') {
                    Some((ip, len)) => (ip, Some(len)),
                    None => (n, None),
                };
                let ip: IpAddr = ip.parse().map_err(|_| format!("'{n}' is not an address or CIDR"))?;
                // Packets carry IPv4 addresses as IPv4: a mapped range would match none.
                if let IpAddr::V6(v6) = ip {
                    if let Some(v4) = v6.to_ipv4_mapped() {
                        return Err(format!(
                            "'{n}' is an IPv4-mapped IPv6 range: write it as IPv4 ({v4}/...)"
                        ));
                    }
                }
                let max = if ip.is_ipv4() { 32 } else { 128 };
                let len = match len {
                    None => max,
                    Some(len) => len.parse::<u8>().map_err(|_| format!("'{n}': bad prefix length"))?,
                };
                if len > max {
                    return Err(format!("'{n}': prefix longer than {max}"));
                }
                // As `ip route` does: an address with bits past the prefix is a typing
                // mistake (which range was meant?), not a range.
                let net = network(ip, len);
                if net != ip {
                    return Err(format!("'{n}' has host bits set (the range is {net}/{len})"));
                }
                Ok((ip, len))
            })
            .collect::<Result<Vec<_>, String>>()?;
        Ok(JobRule { name: name.to_owned(), nets })
    }
}

/// Refuses `--job` rules of two jobs whose ranges overlap: a host belongs to one job
/// (rules of one name are one job, and may overlap).
pub fn check_job_rules(rules: &[JobRule]) -> Result<(), String> {
    let show = |(ip, len): (IpAddr, u8)| format!("{ip}/{len}");
    for (i, a) in rules.iter().enumerate() {
        for b in rules[i + 1..].iter().filter(|b| b.name != a.name) {
            for &x in &a.nets {
                // Two ranges overlap when the shorter prefix holds the other's address.
                if let Some(&y) = b.nets.iter().find(|&&y| in_net(x.0, y.0, x.1.min(y.1))) {
                    return Err(format!(
                        "--job {}={} overlaps --job {}={}: a host belongs to one job",
                        b.name,
                        show(y),
                        a.name,
                        show(x)
                    ));
                }
            }
        }
    }
    Ok(())
}

/// What the straggler's packets show about why it finished last.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Reason {
    /// Retransmitted packets or PSN gaps.
    Loss,
    /// NAKs (sequence error, RNR) on the direction that answers it.
    Nak,
    /// CNPs that throttle it, or ECN-CE marks on it.
    Congestion,
    /// None of these: the host was late, or it had more to send.
    None,
}

impl Reason {
    pub const ALL: [Reason; 4] = [Reason::Loss, Reason::Nak, Reason::Congestion, Reason::None];

    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Loss => "loss",
            Reason::Nak => "nak",
            Reason::Congestion => "congestion",
            Reason::None => "none",
        }
    }
}

/// One step of a job.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    pub job: String,
    pub start_ns: u64,
    pub end_ns: u64,
    /// Request flows that sent in it, and their wire bytes.
    pub flows: usize,
    pub bytes: u64,
    /// The flow that finished last, when, and the median flow's finish.
    pub straggler: FlowKey,
    pub straggler_finish_ns: u64,
    pub median_finish_ns: u64,
    pub reason: Reason,
    /// The straggler's payload over its own time in the step, and the median flow's, in
    /// Gbit/s (payload bytes × 8 / (finish − step start)).
    pub straggler_gbps: f64,
    pub median_gbps: f64,
    /// The input ended before the job paused for `--step-gap` after the step (a capture
    /// cut in the middle of it, or a run stopped): it may have gone on.
    pub at_input_end: bool,
}

impl Step {
    /// How the step closed, as the reports write it: `pause` or `input_end`.
    pub fn closed_by(&self) -> &'static str {
        if self.at_input_end {
            "input_end"
        } else {
            "pause"
        }
    }

    pub fn duration_ns(&self) -> u64 {
        self.end_ns - self.start_ns
    }

    pub fn lag_ns(&self) -> u64 {
        self.straggler_finish_ns - self.median_finish_ns
    }
}

/// A host's record as a straggler.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Straggling {
    pub steps: u64,
    pub lag_ns: u64,
}

/// Steps a job's durations are kept exactly for, before a histogram takes them.
const EXACT_DURATIONS: usize = 1_024;

/// A job's step durations: exactly while it has at most [`EXACT_DURATIONS`] steps (8 KiB),
/// then in a histogram to three significant digits, 1 ns to an hour, with 32-bit counts
/// (about 135 KiB; a count stops at 4,294,967,295 steps in one bucket). A histogram from
/// the first step made each job of a fabric of many small ones cost that much: 40,000 host
/// pairs took 8.9 GB (with 64-bit counts).
#[derive(Debug, Clone)]
pub enum StepDurations {
    /// Kept in order, so that a quantile is a place in the list.
    Exact(Vec<u64>),
    Histogram(Box<Histogram<u32>>),
}

impl StepDurations {
    fn record(&mut self, ns: u64) {
        match self {
            Self::Exact(v) if v.len() < EXACT_DURATIONS => v.insert(v.partition_point(|&d| d <= ns), ns),
            Self::Exact(v) => {
                let mut h =
                    Histogram::new_with_bounds(1, 3_600_000_000_000, 3).expect("valid histogram bounds");
                for &d in v.iter().chain([&ns]) {
                    h.saturating_record(d);
                }
                *self = Self::Histogram(Box::new(h));
            }
            Self::Histogram(h) => h.saturating_record(ns),
        }
    }

    /// Takes in another job's durations (two found jobs joined): exact while there are at
    /// most [`EXACT_DURATIONS`] in all, else a histogram of them all, as if recorded here.
    fn merge(&mut self, other: Self) {
        match other {
            Self::Exact(v) => v.into_iter().for_each(|d| self.record(d)),
            Self::Histogram(mut h) => match self {
                Self::Histogram(mine) => mine.add(&*h).expect("histograms of one configuration"),
                Self::Exact(v) => {
                    for &d in v.iter() {
                        h.saturating_record(d);
                    }
                    *self = Self::Histogram(h);
                }
            },
        }
    }

    /// The duration at quantile `q` (nearest rank), `None` without a step.
    pub fn quantile(&self, q: f64) -> Option<u64> {
        match self {
            Self::Exact(v) if v.is_empty() => None,
            Self::Exact(v) => Some(v[((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1]),
            Self::Histogram(h) => Some(h.value_at_quantile(q)),
        }
    }
}

/// One job over the run.
#[derive(Debug, Clone)]
pub struct JobTotals {
    pub steps: u64,
    /// Step durations (the quantiles).
    pub durations: StepDurations,
    /// The longest step, exactly.
    pub max_ns: u64,
    /// Per (host, reason): steps it was the straggler in, and its total lag.
    pub stragglers: BTreeMap<(IpAddr, Reason), Straggling>,
    pub hosts: Vec<IpAddr>,
    /// The latest step closed.
    pub last: Option<Step>,
}

impl JobTotals {
    fn new() -> Self {
        Self {
            steps: 0,
            durations: StepDurations::Exact(Vec::new()),
            max_ns: 0,
            stragglers: BTreeMap::new(),
            hosts: Vec::new(),
            last: None,
        }
    }

    /// Takes in the totals of another job (two found jobs joined): as if its steps had been
    /// recorded here.
    fn merge(&mut self, other: Self) {
        self.steps += other.steps;
        self.durations.merge(other.durations);
        self.max_ns = self.max_ns.max(other.max_ns);
        for ((host, reason), s) in other.stragglers {
            self.held_back(host, reason, s);
        }
        self.add_hosts(&other.hosts);
        if let Some(l) = other.last {
            self.offer_last(&l);
        }
    }

    /// `host` held back `s.steps` steps of the job for `reason`, by `s.lag_ns` in all.
    fn held_back(&mut self, host: IpAddr, reason: Reason, s: Straggling) {
        let e = self.stragglers.entry((host, reason)).or_default();
        e.steps += s.steps;
        e.lag_ns += s.lag_ns;
    }

    /// The job's hosts with `hosts` (each once, in order).
    fn add_hosts(&mut self, hosts: &[IpAddr]) {
        for &h in hosts {
            if let Err(at) = self.hosts.binary_search(&h) {
                self.hosts.insert(at, h);
            }
        }
    }

    /// `step` is the job's latest step if none started after it.
    fn offer_last(&mut self, step: &Step) {
        if self.last.as_ref().is_none_or(|l| l.start_ns <= step.start_ns) {
            self.last = Some(step.clone());
        }
    }
}

/// What a step needs of a request flow's transmission. A transmission carries all of its
/// flow's counters; the pending list holds up to [`MAX_PENDING`] of these instead, about a
/// third of the bytes to move when it is sorted and split by job every interval.
#[derive(Debug, Clone, Copy)]
struct Member {
    key: FlowKey,
    /// The QPN that sends the flow's packets, once paired.
    peer_qpn: Option<u32>,
    start_ns: u64,
    end_ns: u64,
    /// Wire bytes and packets.
    bytes: u64,
    packets: u64,
    /// Payload bytes less those retransmitted.
    payload: u64,
    /// Retransmitted packets or PSN gaps.
    loss: bool,
    /// CNPs or ECN-CE marks.
    congestion: bool,
    /// The source and destination hosts' places among the hosts of jobs, once joined
    /// ([`Steps::join`]).
    src_host: u32,
    dst_host: u32,
}

impl Member {
    fn of(t: &Transmission) -> Self {
        let c = &t.counts;
        Self {
            key: t.key,
            peer_qpn: t.peer_qpn,
            start_ns: t.start_ns,
            // The flow finished with its last message, not with ACKs it carried for the
            // QP's other direction after it.
            end_ns: t.last_message_ns.unwrap_or(t.end_ns),
            bytes: c.bytes,
            packets: c.packets,
            payload: c.payload_bytes.saturating_sub(c.retx_bytes),
            loss: c.retx_packets + c.gap_psns > 0,
            congestion: c.cnp + c.ecn_ce > 0,
            src_host: u32::MAX,
            dst_host: u32::MAX,
        }
    }

    /// A job's order: by start, then end, then flow. No two pending members share a flow
    /// and a start, so the order is one whatever the sort. Compared field by field: the
    /// flow's key (two addresses) is looked at only on a tie of both times, and no tuple
    /// of the three is built for each comparison.
    fn order(a: &Self, b: &Self) -> std::cmp::Ordering {
        (a.start_ns, a.end_ns).cmp(&(b.start_ns, b.end_ns)).then_with(|| a.key.cmp(&b.key))
    }
}

/// What the step analysis takes from a transmission (two at most), compact, so that it can
/// wait for its interval (`Steps::incoming`) in the room of a pending one.
#[derive(Debug, Clone, Copy)]
enum Arrival {
    /// A QP (address, QPN) of a connection found carrying NVMe capsules: the whole
    /// connection is storage traffic, its data transfers too: the QP a transmission with
    /// capsules (or on a connection its worker knew to carry them, see
    /// [`Transmission::nvme`]) sends to, and the one it sends from once paired. Each direction's capsules
    /// (commands one way, completions the other) name its own destination QP, so both are
    /// found even unpaired.
    Storage((IpAddr, u32)),
    /// NAKs answer the QP's other direction: kept for the flow they answer, also when this
    /// flow sends messages of its own (both sides of a QP send).
    Nak(Nak),
    /// A request flow's transmission (one that ended messages). The answering direction's
    /// count only by their NAKs.
    Request(Member),
}

impl Arrival {
    /// What the analysis takes from `t`: only the compute vantage's RC transmissions count.
    fn of(t: &Transmission) -> [Option<Self>; 2] {
        if t.key.vantage != Vantage::Compute || t.transport != crate::wire::bth::Transport::Rc {
            return [None, None];
        }
        let c = &t.counts;
        if c.nvme_commands + c.nvme_completions > 0 || t.nvme {
            return [
                Some(Self::Storage((t.key.dst, t.key.dst_qpn))),
                t.peer_qpn.map(|q| Self::Storage((t.key.src, q))),
            ];
        }
        let nak = (c.nak_seq + c.nak_rnr > 0).then_some(Self::Nak(Nak {
            from: t.key.src,
            to: t.key.dst,
            answers: t.peer_qpn,
            start_ns: t.start_ns,
            end_ns: t.end_ns,
        }));
        [nak, (c.messages > 0).then(|| Self::Request(Member::of(t)))]
    }

    /// The order `Steps::admit` offers in.
    fn order(a: &Self, b: &Self) -> std::cmp::Ordering {
        use Arrival::*;
        match (a, b) {
            (Storage(x), Storage(y)) => x.cmp(y),
            (Nak(x), Nak(y)) => (x.start_ns, x.end_ns, x.from, x.to, x.answers)
                .cmp(&(y.start_ns, y.end_ns, y.from, y.to, y.answers)),
            (Request(x), Request(y)) => Member::order(x, y),
            _ => a.rank().cmp(&b.rank()),
        }
    }

    fn rank(&self) -> u8 {
        match self {
            Self::Storage(_) => 0,
            Self::Nak(_) => 1,
            Self::Request(_) => 2,
        }
    }
}

/// Finds the steps of every job from the transmissions the workers end.
#[derive(Debug, Clone)]
pub struct Steps {
    rules: Vec<JobRule>,
    gap_ns: u64,
    /// How long after a step's end its last transmission may still arrive.
    settle_ns: u64,
    /// Union-find over the hosts that request flows connect (the hosts no rule names).
    index: HashMap<IpAddr, usize, ahash::RandomState>,
    parent: Vec<usize>,
    ips: Vec<IpAddr>,
    /// By host place: the rule naming the host (the first rule of its name, so that rules
    /// of one name are one job), or [`NO_RULE`].
    rule_of: Vec<u32>,
    /// By host place, at a group's root: the group's name once a step of it has closed.
    named: Vec<Option<Name>>,
    /// Request flows' transmissions whose step has not closed.
    pending: Vec<Member>,
    /// Transmissions still open at the end of an interval (from the workers' interval
    /// reports: the compute vantage's RC flows, not of connections found carrying NVMe):
    /// their interval's end, the flow's hosts and the transmission's start, until every
    /// worker has reported that interval.
    opens_incoming: Vec<(u64, IpAddr, IpAddr, u64)>,
    /// Those of the last interval every worker reported: a step of their hosts' job that
    /// they started within `--step-gap` of does not close (it cannot end before they do).
    opens: Vec<(IpAddr, IpAddr, u64)>,
    /// What the analysis takes from transmissions offered before every worker reported the
    /// interval they are counted in (`Steps::offer_reported`), with that interval's end:
    /// taken when [`Steps::advance`] reaches it.
    incoming: Vec<(u64, Arrival)>,
    /// Those of `incoming` being offered (kept for its room).
    admitting: Vec<Arrival>,
    /// What [`Steps::advance`] was last told every worker has reported.
    done_ns: u64,
    /// The ends of the intervals some worker reported, or some transmission waiting was
    /// counted in, past `done_ns`.
    ends: BTreeSet<u64>,
    /// How many of the first `pending` a close left waiting. They have joined their hosts'
    /// groups, were checked against `nvme_qps` as it was then (`nvme_checked` QPs), and
    /// are in their job's order: a close joins and sorts only those after them, and checks
    /// the waiting ones again only if a QP has been found carrying NVMe since.
    joined: usize,
    nvme_checked: usize,
    /// The last packet's time, once the run has ended (see [`Steps::finish`]).
    input_end_ns: Option<u64>,
    /// Transmissions that carried NAKs, in the order they came.
    naks: VecDeque<Nak>,
    /// The QPs (address, QPN) of connections that carried NVMe capsules: storage, not a
    /// job. By QP, not by host pair: two hosts may run a collective beside an NVMe
    /// connection between them.
    nvme_qps: HashSet<(IpAddr, u32), ahash::RandomState>,
    /// Steps closed since the last [`Steps::take_closed`] or [`Steps::take_writes`].
    closed: Vec<Step>,
    /// Where one worker would have written (see [`Steps::advance`]): how many of `closed`
    /// had closed, and the earliest start of a transmission still pending then.
    writes: Vec<(usize, Option<u64>)>,
    /// What closing a step works in, kept from one step to the next.
    scratch: Scratch,
    pub jobs: BTreeMap<String, JobTotals>,
    /// `--max-jobs`: the most jobs with run totals (each up to about 143 KiB).
    max_jobs: usize,
    /// Found jobs named without room under `--max-jobs`, still apart (not joined with one
    /// that has totals): their steps are written (steps.csv, stragglers.csv) but have no
    /// run totals.
    jobs_not_kept: usize,
    /// The most jobs there were at once, with totals or not: the `--max-jobs` that would
    /// have kept them all.
    pub jobs_peak: usize,
    /// Steps closed without run totals (of jobs beyond `--max-jobs`).
    pub steps_not_kept: u64,
    /// Transmissions not analysed: beyond the bound on hosts, or pending.
    pub dropped: u64,
    /// Transmissions between a rule's host and a host outside that rule: in no job.
    pub outside_jobs: u64,
}

/// A host no `--job` rule names.
const NO_RULE: u32 = u32::MAX;

/// The name of a group of hosts no rule names, given when its first step closes and kept.
#[derive(Debug, Clone, Copy)]
struct Name {
    /// The lowest address among the hosts of that step (not of the group: hosts that joined
    /// it since, or whose transmissions came sooner, would make the name depend on when
    /// the step closed, so on `--interval` and `--workers`).
    ip: IpAddr,
    /// That step's start: of two named groups joined, the one named first keeps its name.
    first_ns: u64,
    /// The job has run totals (`Steps::jobs`): there was room for it under `--max-jobs`
    /// when it was named, or it was joined with a job that had.
    kept: bool,
}

/// Whose a list of pending transmissions is while a close splits them ([`Steps::by_job`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Owner {
    /// A `--job` rule's hosts, by the first rule of the name.
    Rule(u32),
    /// A group of hosts no rule names, by its root's place.
    Group(usize),
    /// Flows between a rule's host and a host outside that rule: in no job.
    Outside,
}

impl Default for Steps {
    fn default() -> Self {
        Self::new(Vec::new(), crate::defaults::STEP_GAP_NS, 0, crate::defaults::MAX_JOBS)
    }
}

impl Steps {
    /// `max_jobs` bounds the jobs with run totals; the jobs of `rules` always have theirs
    /// (the command line refuses more names than the bound: [`check_job_rules`]).
    pub fn new(rules: Vec<JobRule>, gap_ns: u64, settle_ns: u64, max_jobs: usize) -> Self {
        // Every named job is reported, with no step if no traffic of its hosts came: a
        // rule that matched nothing shows as such.
        let jobs: BTreeMap<String, JobTotals> =
            rules.iter().map(|r| (r.name.clone(), JobTotals::new())).collect();
        Self {
            max_jobs,
            jobs_not_kept: 0,
            jobs_peak: jobs.len(),
            steps_not_kept: 0,
            rules,
            gap_ns,
            settle_ns,
            index: HashMap::default(),
            parent: Vec::new(),
            ips: Vec::new(),
            rule_of: Vec::new(),
            named: Vec::new(),
            pending: Vec::new(),
            opens_incoming: Vec::new(),
            opens: Vec::new(),
            incoming: Vec::new(),
            admitting: Vec::new(),
            done_ns: 0,
            ends: BTreeSet::new(),
            joined: 0,
            nvme_checked: 0,
            input_end_ns: None,
            naks: VecDeque::new(),
            nvme_qps: HashSet::default(),
            closed: Vec::new(),
            writes: Vec::new(),
            scratch: Scratch::default(),
            jobs,
            dropped: 0,
            outside_jobs: 0,
        }
    }

    fn host(&mut self, ip: IpAddr) -> Option<usize> {
        if let Some(&i) = self.index.get(&ip) {
            return Some(i);
        }
        if self.ips.len() >= MAX_HOSTS {
            return None;
        }
        let i = self.ips.len();
        self.index.insert(ip, i);
        self.parent.push(i);
        self.ips.push(ip);
        let rule = self.rules.iter().find(|r| r.contains(ip));
        let first = rule.and_then(|r| self.rules.iter().position(|f| f.name == r.name));
        self.rule_of.push(first.map_or(NO_RULE, |k| k as u32));
        self.named.push(None);
        Some(i)
    }

    fn root(&mut self, mut i: usize) -> usize {
        while self.parent[i] != i {
            self.parent[i] = self.parent[self.parent[i]];
            i = self.parent[i];
        }
        i
    }

    /// A transmission a worker ended, counted in its interval that ends at `interval_end`.
    /// It joins the analysis once every worker has reported that interval (see
    /// [`Steps::advance`]): one worker hands over its transmissions before each interval's
    /// report, so a step that closes when the workers report an interval holds the
    /// transmissions of that interval and those before it, never later ones, however the
    /// workers' reports interleave. (After the clock steps back, later intervals carry
    /// transmissions of earlier times, which would otherwise join a step or not by which
    /// worker's report came first.)
    pub fn offer_reported(&mut self, t: &Transmission, interval_end: u64) {
        if interval_end <= self.done_ns {
            self.offer(t);
            return;
        }
        if self.incoming.len() + self.pending.len() >= MAX_PENDING {
            // A worker far ahead of another, or a job that never pauses: what waits is
            // offered now, so that the bound holds (see `close_oldest`).
            self.admit(u64::MAX);
        }
        self.incoming.extend(Arrival::of(t).into_iter().flatten().map(|a| (interval_end, a)));
        self.ends.insert(interval_end);
    }

    /// A flow of `key` had a transmission open since `start_ns` at the end of the interval
    /// that ends at `interval_end` (before [`Steps::reported`] of that interval).
    pub fn open_reported(&mut self, key: &FlowKey, start_ns: u64, interval_end: u64) {
        if key.vantage != Vantage::Compute
            || interval_end <= self.done_ns
            || self.nvme_qps.contains(&(key.dst, key.dst_qpn))
            || self.opens_incoming.len() >= MAX_PENDING
        {
            return;
        }
        self.opens_incoming.push((interval_end, key.src, key.dst, start_ns));
    }

    /// A worker reported the interval that ends at `end_ns` (before [`Steps::advance`]
    /// with what every worker has reported).
    pub fn reported(&mut self, end_ns: u64) {
        if end_ns > self.done_ns && self.ends.len() < MAX_PENDING {
            self.ends.insert(end_ns);
        }
    }

    /// Offers what waits for intervals up to `done_ns`, in one order (NVMe QPs, then NAKs,
    /// then request flows' transmissions, each by start, end and flow), not in the order
    /// the workers' batches came: where the order matters (the bound on pending
    /// transmissions, reached in the middle of them, closes what is pending then) it is
    /// the same with any number of workers.
    fn admit(&mut self, done_ns: u64) {
        if self.incoming.is_empty() {
            return;
        }
        let mut due = std::mem::take(&mut self.admitting);
        self.incoming.retain(|&(end, a)| {
            let now = end <= done_ns;
            if now {
                due.push(a);
            }
            !now
        });
        due.sort_unstable_by(Arrival::order);
        for a in due.drain(..) {
            self.take(a);
        }
        self.admitting = due;
    }

    /// A transmission the workers ended, analysed now. Only the compute vantage's RC ones
    /// are looked at, so that a second vantage changes nothing.
    pub fn offer(&mut self, t: &Transmission) {
        for a in Arrival::of(t).into_iter().flatten() {
            self.take(a);
        }
    }

    fn take(&mut self, a: Arrival) {
        match a {
            Arrival::Storage(qp) => {
                if self.nvme_qps.len() < MAX_HOSTS {
                    self.nvme_qps.insert(qp);
                }
            }
            Arrival::Nak(n) => {
                if self.naks.len() >= MAX_PENDING {
                    self.naks.pop_front();
                }
                self.naks.push_back(n);
            }
            Arrival::Request(m) => {
                if self.pending.len() >= MAX_PENDING {
                    self.close_oldest();
                }
                self.pending.push(m);
            }
        }
    }

    /// Every worker has reported the intervals up to `done_ns`: the steps they are all past
    /// by the settle time close, and the NAKs no step can use any more go.
    ///
    /// One worker's stats side closes steps at each interval it reports, with the
    /// transmissions of that interval and of those before, and writes stragglers.csv after
    /// each close. So the transmissions waiting join interval by interval, each interval's
    /// followed by the close one worker would make there, and a write ([`Steps::take_writes`]):
    /// with several workers, the same steps close and the same rows are written, whichever
    /// worker's report came first.
    pub fn advance(&mut self, done_ns: u64) {
        self.done_ns = self.done_ns.max(done_ns);
        self.admit_by_interval(self.done_ns);
        self.close_at(self.done_ns);
    }

    /// The transmissions waiting for intervals that end up to `upto`, each interval's in
    /// turn, with the close and the write that follow (see [`Steps::advance`]): at the end
    /// of every interval a worker reported, whether or not transmissions came in it (one
    /// worker closes steps at every interval it reports, say one in which only an I/O timed
    /// out).
    fn admit_by_interval(&mut self, upto: u64) {
        while let Some(end) = self.ends.first().copied().filter(|&end| end <= upto) {
            self.ends.pop_first();
            self.admit(end);
            self.opens.clear();
            let opens = &mut self.opens;
            self.opens_incoming.retain(|&(e, src, dst, start)| {
                if e == end {
                    opens.push((src, dst, start));
                }
                e > end
            });
            self.close_at(end);
            self.writes.push((self.closed.len(), self.oldest_pending_ns()));
        }
    }

    /// The steps every worker is past by the settle time at `done_ns` close, and the NAKs no
    /// step can use any more go.
    fn close_at(&mut self, done_ns: u64) {
        let settle = self.settle_ns;
        // The jobs of the transmissions still open, with their starts.
        let mut open = std::mem::take(&mut self.scratch.open);
        open.clear();
        for k in 0..self.opens.len() {
            let (src, dst, start) = self.opens[k];
            for ip in [src, dst] {
                if let Some(&h) = self.index.get(&ip) {
                    open.push((self.owner(h), start));
                }
            }
        }
        let gap = self.gap_ns;
        let held = |owner: Owner, end: u64| {
            open.iter().any(|&(o, start)| o == owner && start <= end.saturating_add(gap))
        };
        self.close(|owner, step_end, _| step_end.saturating_add(settle) < done_ns && !held(owner, step_end));
        self.scratch.open = open;
        // A transmission still to come ends after `done_ns - settle`; one pending started at
        // the oldest pending start.
        let horizon = self.oldest_pending_ns().unwrap_or(u64::MAX).min(done_ns.saturating_sub(settle));
        let gap = self.gap_ns;
        self.naks.retain(|n| n.end_ns.saturating_add(gap) >= horizon);
    }

    /// The end of the run, whose last packet came at `input_end_ns`: every step closes,
    /// those that end less than `--step-gap` before it marked as such.
    pub fn finish(&mut self, input_end_ns: Option<u64>) {
        self.admit_by_interval(u64::MAX);
        self.input_end_ns = input_end_ns;
        self.close(|_, _, _| true);
        self.naks.clear();
    }

    /// `--max-jobs`, if it left steps out of their job's run totals: how many, and the
    /// value that would have kept them.
    pub fn bound(&self) -> Option<super::snapshot::BoundAdvice> {
        (self.steps_not_kept > 0).then(|| super::snapshot::BoundAdvice {
            option: "--max-jobs".into(),
            limit: self.max_jobs as u64,
            lost: self.steps_not_kept,
            what: "collective steps of jobs without run totals (steps.csv and stragglers.csv have them)"
                .into(),
            needed: Some(self.jobs_peak as u64),
            needed_at_least: false,
        })
    }

    /// The steps closed since the last call (steps.csv writes them by end).
    pub fn take_closed(&mut self) -> Vec<Step> {
        self.writes.clear();
        std::mem::take(&mut self.closed)
    }

    /// The steps closed since the last call, in the writes one worker's stats side makes
    /// (see [`Steps::advance`]): each with the earliest start of a transmission whose step
    /// had not closed after it (stragglers.csv writes an interval's rows once no step still
    /// open can end in it). The last is what closed since the last interval's write, with
    /// the earliest start now.
    pub fn take_writes(&mut self) -> Vec<(Vec<Step>, Option<u64>)> {
        let mut closed = std::mem::take(&mut self.closed).into_iter();
        let mut out = Vec::with_capacity(self.writes.len() + 1);
        let mut taken = 0;
        for (n, open_from) in self.writes.drain(..) {
            out.push((closed.by_ref().take(n - taken).collect(), open_from));
            taken = n;
        }
        out.push((closed.collect(), self.oldest_pending_ns()));
        out
    }

    /// The earliest start of a transmission whose step has not closed: steps closed later
    /// all end after it.
    pub fn oldest_pending_ns(&self) -> Option<u64> {
        self.pending.iter().map(|t| t.start_ns).min()
    }

    /// The job of a host (by its place): the first `--job` rule of the name of the rule
    /// that holds it, else its group.
    fn owner(&mut self, h: usize) -> Owner {
        match self.rule_of[h] {
            NO_RULE => Owner::Group(self.root(h)),
            k => Owner::Rule(k),
        }
    }

    /// Notes the places of the hosts a request flow connects, and joins them if no rule
    /// names either (a rule's hosts are its job); false beyond the bound on hosts.
    ///
    /// Two groups that both have a name (each had a step closed) become one job under the
    /// name given first, by its first step's start in packet time (then the lower address):
    /// the name the joined group's own first step gives when no step closed before the
    /// join (a longer `--interval`), whatever the order the hosts were seen in. The other
    /// name's totals are taken into it and the name is reported no more; the steps already
    /// written under it keep it.
    fn join(&mut self, t: &mut Member) -> bool {
        let (Some(a), Some(b)) = (self.host(t.key.src), self.host(t.key.dst)) else { return false };
        (t.src_host, t.dst_host) = (a as u32, b as u32);
        if self.rule_of[a] == NO_RULE && self.rule_of[b] == NO_RULE {
            let (ra, rb) = (self.root(a), self.root(b));
            if ra != rb {
                let (root, other) = (ra.min(rb), ra.max(rb));
                self.parent[other] = root;
                let name = match (self.named[root].take(), self.named[other].take()) {
                    (Some(x), Some(y)) => {
                        let first = (x.first_ns, x.ip) <= (y.first_ns, y.ip);
                        let (stays, gone) = if first { (x, y) } else { (y, x) };
                        // One job of the two: if either had run totals, the joined job has
                        // them (the steps of one without stay uncounted in them), and no
                        // more jobs have totals than before.
                        let kept = x.kept || y.kept;
                        self.jobs_not_kept -=
                            usize::from(!x.kept) + usize::from(!y.kept) - usize::from(!kept);
                        if let Some(totals) = self.jobs.remove(&gone.ip.to_string()) {
                            self.jobs
                                .entry(stays.ip.to_string())
                                .or_insert_with(JobTotals::new)
                                .merge(totals);
                        }
                        Some(Name { kept, ..stays })
                    }
                    (x, y) => x.or(y),
                };
                self.named[root] = name;
            }
        }
        true
    }

    /// Whether a joined flow is in a job: both its hosts are one rule's, or neither is
    /// any rule's.
    fn in_a_job(&self, t: &Member) -> bool {
        self.rule_of[t.src_host as usize] == self.rule_of[t.dst_host as usize]
    }

    /// Whether a transmission is on a connection found carrying NVMe: the QP it sends to,
    /// or the one it sends from.
    fn storage(&self, t: &Member) -> bool {
        self.nvme_qps.contains(&(t.key.dst, t.key.dst_qpn))
            || t.peer_qpn.is_some_and(|q| self.nvme_qps.contains(&(t.key.src, q)))
    }

    /// The pending transmissions by job, each job's in start order. Those of connections
    /// found carrying NVMe meanwhile are dropped here (storage traffic is no job). Each
    /// host's job is named once (not once per transmission) and found for a transmission by
    /// its source host's place (not looked up by address), the transmissions are moved
    /// (not copied), and only those that came since the last close are joined and sorted,
    /// then put in order among those it left waiting (see [`in_order`]): the stats
    /// thread does this every interval over up to [`MAX_PENDING`] transmissions.
    fn by_job(&mut self) -> BTreeMap<Owner, Vec<Member>> {
        let mut ts = std::mem::take(&mut self.pending);
        let old = std::mem::take(&mut self.joined);
        // The waiting ones need checking again only against QPs found since.
        let recheck = self.nvme_qps.len() != self.nvme_checked;
        self.nvme_checked = self.nvme_qps.len();
        let (mut dropped, mut k, mut kept_old) = (0, 0, 0);
        ts.retain_mut(|t| {
            k += 1;
            let waiting = k <= old;
            if (!waiting || recheck) && self.storage(t) {
                return false;
            }
            // Joining again would change nothing (a waiting one has its host's place).
            let joined = (waiting && t.src_host != u32::MAX) || self.join(t);
            dropped += u64::from(!joined);
            kept_old += usize::from(waiting);
            joined
        });
        self.dropped += dropped;
        ts[kept_old..].sort_unstable_by(Member::order);
        // Each source host's job (by the host's place), as an index into `jobs`; how many
        // transmissions each job has, and how many of them waited.
        let mut job_of = std::mem::take(&mut self.scratch.job_of);
        job_of.clear();
        job_of.resize(self.ips.len(), usize::MAX);
        let mut by_owner: HashMap<Owner, usize, ahash::RandomState> = HashMap::default();
        let mut jobs: Vec<(Owner, usize, usize)> = Vec::new();
        // A flow between a rule's host and a host outside it waits as the others do (its
        // connection may yet be found carrying NVMe), in a list of its own, counted as it closes.
        let mut outside = usize::MAX;
        for (i, t) in ts.iter().enumerate() {
            let h = t.src_host as usize;
            let j = match job_of[h] {
                _ if !self.in_a_job(t) => {
                    if outside == usize::MAX {
                        jobs.push((Owner::Outside, 0, 0));
                        outside = jobs.len() - 1;
                    }
                    outside
                }
                usize::MAX => {
                    let owner = self.owner(h);
                    let j = *by_owner.entry(owner).or_insert_with(|| {
                        jobs.push((owner, 0, 0));
                        jobs.len() - 1
                    });
                    job_of[h] = j;
                    j
                }
                j => j,
            };
            jobs[j].1 += 1;
            jobs[j].2 += usize::from(i < kept_old);
        }
        let mut out = BTreeMap::new();
        if jobs.len() == 1 {
            // One job (a cluster's usual case): the list is the pending list itself.
            self.scratch.job_of = job_of;
            let (owner, _, waited) = jobs.swap_remove(0);
            in_order(&mut ts, waited, &mut self.scratch.merge);
            out.insert(owner, ts);
            return out;
        }
        let mut lists: Vec<Vec<Member>> = jobs.iter().map(|&(_, n, _)| Vec::with_capacity(n)).collect();
        for t in ts {
            let j = if self.in_a_job(&t) { job_of[t.src_host as usize] } else { outside };
            lists[j].push(t);
        }
        self.scratch.job_of = job_of;
        for ((owner, _, waited), mut v) in jobs.into_iter().zip(lists) {
            in_order(&mut v, waited, &mut self.scratch.merge);
            out.insert(owner, v);
        }
        out
    }

    /// Closes, in each job's order, the steps `due` says may close, given a step's end and
    /// the share of its job's pending transmissions that the steps before it hold; from
    /// the first that may not, the rest wait.
    fn close(&mut self, due: impl Fn(Owner, u64, f64) -> bool) {
        if self.pending.is_empty() {
            return;
        }
        for (owner, mut ts) in self.by_job() {
            // The steps that close are the first ones of the job's list: how many
            // transmissions they hold.
            let mut closed = 0;
            if owner == Owner::Outside {
                // The flows of no job make no step: each waits for its own end only (its
                // connection may yet be found carrying NVMe), not for a pause of them all, which
                // a busy fabric may never make.
                let n = ts.len();
                ts.retain(|t| !due(owner, t.end_ns, 0.0));
                self.outside_jobs += (n - ts.len()) as u64;
            } else {
                for group in groups(&ts, self.gap_ns) {
                    let end = group.iter().map(|t| t.end_ns).max().unwrap_or(0);
                    if !due(owner, end, closed as f64 / ts.len() as f64) {
                        break;
                    }
                    self.record(owner, group);
                    closed += group.len();
                }
            }
            if self.pending.is_empty() {
                // What waits becomes the pending list, in the list's own allocation. The
                // memory of a list that grew towards the bound goes back once most of it
                // has closed; cut at every close, a job that never pauses (closed a quarter
                // at a time at the bound) grew it again each time, page by page.
                ts.drain(..closed);
                if ts.len() < ts.capacity() / 4 {
                    ts.shrink_to(2 * ts.len());
                }
                self.pending = ts;
            } else {
                self.pending.extend(ts.drain(closed..));
            }
        }
        self.joined = self.pending.len();
    }

    /// Too many transmissions pending: each job's oldest steps close with what they have,
    /// so that the bound holds even for a job that never pauses: the first, and the next
    /// ones until a quarter of the job's pending transmissions are closed. (Closing only the
    /// first made a job with a short first step pay a close, which sorts and splits the
    /// whole list, for every few transmissions offered once at the bound.)
    fn close_oldest(&mut self) {
        self.close(|_, _, before| before < 0.25);
    }

    /// Records a step of a job. A group of hosts no rule names is named here, at its first
    /// step, by the lowest address among that step's hosts, and keeps the name: the job's
    /// name does not change as hosts join it, and does not depend on when a step closes.
    fn record(&mut self, owner: Owner, group: &[Member]) {
        // A step closed at the bound holds up to MAX_PENDING transmissions between a few
        // hundred hosts: the distinct ones first (each host marked by its place as the
        // step's), then sorted.
        let Scratch { marked, stamp, hosts, .. } = &mut self.scratch;
        marked.resize(self.ips.len(), 0);
        *stamp = stamp.wrapping_add(1);
        if *stamp == 0 {
            marked.fill(0);
            *stamp = 1;
        }
        hosts.clear();
        for t in group {
            for (h, ip) in [(t.src_host, t.key.src), (t.dst_host, t.key.dst)] {
                match marked.get_mut(h as usize) {
                    Some(m) if *m == *stamp => {}
                    Some(m) => {
                        *m = *stamp;
                        hosts.push(ip);
                    }
                    None => hosts.push(ip),
                }
            }
        }
        hosts.sort_unstable();
        hosts.dedup();
        let (job, kept) = match owner {
            Owner::Rule(k) => (self.rules[k as usize].name.clone(), true),
            Owner::Group(root) => {
                let start_ns = group.iter().map(|t| t.start_ns).min().unwrap_or(0);
                let Some(&ip) = self.scratch.hosts.first() else { return };
                let name = match self.named[root] {
                    Some(name) => name,
                    None => {
                        // A job found: run totals if there is room for them.
                        let kept = self.jobs.len() < self.max_jobs;
                        self.jobs_not_kept += usize::from(!kept);
                        self.jobs_peak =
                            self.jobs_peak.max(self.jobs.len() + usize::from(kept) + self.jobs_not_kept);
                        *self.named[root].insert(Name { ip, first_ns: start_ns, kept })
                    }
                };
                (name.ip.to_string(), name.kept)
            }
            // The flows of no job make no step (`close` takes them apart).
            Owner::Outside => return,
        };
        let mut step = step_of(&job, group, &self.naks, &mut self.scratch);
        step.at_input_end = self.input_end_ns.is_some_and(|e| step.end_ns.saturating_add(self.gap_ns) > e);
        if !kept {
            // Written as every step is (steps.csv, stragglers.csv), without run totals.
            self.steps_not_kept += 1;
            self.closed.push(step);
            self.scratch.trim();
            return;
        }
        let j = self.jobs.entry(job).or_insert_with(JobTotals::new);
        j.steps += 1;
        j.durations.record(step.duration_ns());
        j.max_ns = j.max_ns.max(step.duration_ns());
        j.held_back(step.straggler.src, step.reason, Straggling { steps: 1, lag_ns: step.lag_ns() });
        j.add_hosts(&self.scratch.hosts);
        j.offer_last(&step);
        self.closed.push(step);
        self.scratch.trim();
    }
}

/// The maps and lists closing a step works in. Made once and cleared for each step, not
/// allocated for each: at fabric scale (a job that never pauses, closed at the bound) the
/// stats thread closed hundreds of steps a second, each allocating and growing a map of
/// its flows, and a fifth of its time went to page faults and returning memory.
#[derive(Debug, Clone, Default)]
struct Scratch {
    /// A step's flows, by [`flow_id`].
    flows: HashMap<u64, FlowInStep, ahash::RandomState>,
    finishes: Vec<u64>,
    rates: Vec<f64>,
    /// By host place: the step that last listed the host (`stamp`), so that each is listed
    /// once without a set of addresses.
    marked: Vec<u32>,
    stamp: u32,
    hosts: Vec<IpAddr>,
    /// The new part of a job's list while it is merged with the part waiting ([`in_order`]).
    merge: Vec<Member>,
    /// Each host's job while a close splits the list by job (by the host's place).
    job_of: Vec<usize>,
    /// The jobs of the transmissions still open, with their starts, while steps close.
    open: Vec<(Owner, u64)>,
}

impl Scratch {
    /// Flows (or hosts) in a step beyond which what the scratch grew to is given back after
    /// the step: the usual step keeps its room, a rare huge one does not keep its memory.
    const KEEP: usize = 32_768;

    fn trim(&mut self) {
        if self.flows.capacity() > 2 * Self::KEEP {
            self.flows = HashMap::default();
            self.finishes = Vec::new();
            self.rates = Vec::new();
        }
        if self.hosts.capacity() > 2 * Self::KEEP {
            self.hosts = Vec::new();
        }
    }
}

/// Puts a job's list in its order, given that its first `waited` members are the ones a
/// close left waiting and the rest came since, each part in order already (unless groups
/// merged since, which joins two jobs' waiting parts: then that part is sorted). The
/// waiting ones that start after the first new one are merged with the new ones, from the
/// back, through `buf`, which holds a copy of the new ones and is kept from one close to
/// the next. (Sorting them all again cost a third of the stats thread on a job that never
/// pauses, closed a quarter at a time at the bound; a merge through a copy allocated at
/// each close made the soak test's resident memory creep.)
fn in_order(v: &mut [Member], waited: usize, buf: &mut Vec<Member>) {
    let (old, new) = v.split_at_mut(waited);
    if !old.is_sorted_by(|a, b| Member::order(a, b).is_le()) {
        old.sort_unstable_by(Member::order);
    }
    let Some(first) = new.first() else { return };
    let from = old.partition_point(|m| Member::order(m, first).is_le());
    if from == waited {
        return;
    }
    buf.clear();
    buf.reserve_exact(new.len());
    buf.extend_from_slice(new);
    // v[from..waited] and buf, each in order, into v[from..], largest first.
    let (mut i, mut j) = (waited, buf.len());
    for k in (from..v.len()).rev() {
        if j == 0 {
            break; // the rest of the waiting ones are in place
        }
        if i > from && Member::order(&v[i - 1], &buf[j - 1]).is_gt() {
            v[k] = v[i - 1];
            i -= 1;
        } else {
            v[k] = buf[j - 1];
            j -= 1;
        }
    }
    // A close at the bound merges a quarter of it, a little more with what came meanwhile.
    if buf.capacity() > MAX_PENDING / 2 {
        *buf = Vec::new();
    }
}

/// Transmissions in start order cut into steps: a gap longer than `gap_ns` after the latest
/// end so far starts a new one.
fn groups(ts: &[Member], gap_ns: u64) -> Vec<&[Member]> {
    let mut out = Vec::new();
    let mut from = 0;
    let mut end = 0u64;
    for (i, t) in ts.iter().enumerate() {
        if i > from && t.start_ns > end.saturating_add(gap_ns) {
            out.push(&ts[from..i]);
            from = i;
            end = 0;
        }
        end = end.max(t.end_ns);
    }
    if from < ts.len() {
        out.push(&ts[from..]);
    }
    out
}

/// A flow of a step by its hosts' places and its destination QP, one word: the steps are
/// the compute vantage's (one vantage), there are at most [`MAX_HOSTS`] (16 bits each),
/// and a QPN has 24 bits. Hashed per transmission where the flow's key (two addresses)
/// hashed several times slower.
fn flow_id(t: &Member) -> u64 {
    const _: () = assert!(MAX_HOSTS <= 1 << 16);
    (u64::from(t.src_host) << 40) | (u64::from(t.dst_host) << 24) | u64::from(t.key.dst_qpn & 0x00FF_FFFF)
}

/// What a step adds up per flow: its finish, its payload (less retransmissions), and
/// whether its packets showed loss or congestion.
#[derive(Debug, Clone, Copy)]
struct FlowInStep {
    key: FlowKey,
    finish: u64,
    payload: u64,
    bytes: u64,
    packets: u64,
    loss: bool,
    congestion: bool,
}

/// A transmission that carried NAKs (sequence or RNR): from and to which host, the QPN that
/// sends the packets it answers (its flow's pair's, when known), and its span.
#[derive(Debug, Clone, Copy)]
struct Nak {
    from: IpAddr,
    to: IpAddr,
    answers: Option<u32>,
    start_ns: u64,
    end_ns: u64,
}

/// The step a group of transmissions makes: its span, its flows, the straggler and why.
fn step_of(job: &str, group: &[Member], naks: &VecDeque<Nak>, scratch: &mut Scratch) -> Step {
    let start_ns = group.iter().map(|t| t.start_ns).min().unwrap_or(0);
    let end_ns = group.iter().map(|t| t.end_ns).max().unwrap_or(0);
    let Scratch { flows, finishes, rates, .. } = scratch;
    flows.clear();
    let mut bytes = 0;
    for t in group {
        bytes += t.bytes;
        let f = flows.entry(flow_id(t)).or_insert(FlowInStep {
            key: t.key,
            finish: 0,
            payload: 0,
            bytes: 0,
            packets: 0,
            loss: false,
            congestion: false,
        });
        f.finish = f.finish.max(t.end_ns);
        f.payload += t.payload;
        f.bytes += t.bytes;
        f.packets += t.packets;
        f.loss |= t.loss;
        f.congestion |= t.congestion;
    }
    finishes.clear();
    finishes.extend(flows.values().map(|f| f.finish));
    finishes.sort_unstable();
    let median_finish_ns = finishes[(finishes.len() - 1) / 2];
    // The last to finish; among equals, the lowest key.
    let f = flows
        .values()
        .max_by(|a, b| a.finish.cmp(&b.finish).then_with(|| b.key.cmp(&a.key)))
        .expect("a step has a flow");
    let straggler = &f.key;
    // NAKs on the straggler's QP: sent from its destination to its source, by the flow
    // whose packets the straggler's QP sends (its pair's QPN; when the pair is not known,
    // any of the two hosts' QPs).
    let answered_with_nak = naks.iter().any(|n| {
        n.from == straggler.dst
            && n.to == straggler.src
            && n.answers.is_none_or(|q| q == straggler.dst_qpn)
            && n.start_ns <= f.finish
            && n.end_ns >= start_ns
    });
    let reason = if f.loss {
        Reason::Loss
    } else if answered_with_nak {
        Reason::Nak
    } else if f.congestion {
        Reason::Congestion
    } else {
        Reason::None
    };
    // Over the time from the step's start to the flow's finish, at least one of its
    // packets' time (a step of one packet has a rate a link can carry).
    let gbps = |f: &FlowInStep| {
        let d = (f.finish - start_ns).max(crate::metrics::packet_time_ns(f.bytes, f.packets));
        (f.payload * 8) as f64 / d as f64
    };
    rates.clear();
    rates.extend(flows.values().map(gbps));
    rates.sort_by(f64::total_cmp);
    Step {
        job: job.to_owned(),
        start_ns,
        end_ns,
        flows: flows.len(),
        bytes,
        straggler: *straggler,
        straggler_finish_ns: f.finish,
        median_finish_ns,
        reason,
        straggler_gbps: gbps(f),
        median_gbps: rates[(rates.len() - 1) / 2],
        at_input_end: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::track::FlowCounts;
    use crate::wire::bth::Transport;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn tx(src: &str, dst: &str, start: u64, end: u64, f: impl Fn(&mut FlowCounts)) -> Transmission {
        tx_qp(src, dst, 7, start, end, f)
    }

    /// [`tx`] to QP `dst_qpn`.
    fn tx_qp(
        src: &str,
        dst: &str,
        dst_qpn: u32,
        start: u64,
        end: u64,
        f: impl Fn(&mut FlowCounts),
    ) -> Transmission {
        let mut counts = FlowCounts {
            packets: 10,
            bytes: 10_000,
            payload_bytes: 9_000,
            messages: 2,
            ..Default::default()
        };
        f(&mut counts);
        Transmission {
            key: FlowKey { vantage: Vantage::Compute, src: ip(src), dst: ip(dst), dst_qpn },
            transport: Transport::Rc,
            start_ns: start,
            end_ns: end,
            last_message_ns: Some(end),
            nvme: false,
            peer_qpn: None,
            counts,
        }
    }

    #[test]
    fn job_rules() {
        let r: JobRule = "train=10.1.0.0/16,fd00::/8".parse().unwrap();
        assert_eq!(r.name, "train");
        assert!(r.contains(ip("10.1.2.3")) && r.contains(ip("fd00::1")) && !r.contains(ip("10.2.0.1")));
        assert!("x".parse::<JobRule>().is_err());
        assert!("llm =10.1.0.0/16".parse::<JobRule>().is_err(), "a name ending with a space");
        assert!(" llm=10.1.0.0/16".parse::<JobRule>().is_err(), "a name beginning with a space");
        assert!("a=::ffff:10.1.0.0/112".parse::<JobRule>().is_err(), "an IPv4-mapped range");
        assert!("a b=10.1.0.0/16".parse::<JobRule>().is_ok(), "a space inside a name");
        assert!("a=10.0.0.0/33".parse::<JobRule>().is_err());
        assert!("a=nonsense".parse::<JobRule>().is_err());
        // A '/' without a length is a mistake, not a single address.
        assert!("a=10.1.0.0/".parse::<JobRule>().is_err());
        assert_eq!("a=10.1.0.1".parse::<JobRule>().unwrap().nets, vec![(ip("10.1.0.1"), 32)]);
        // Bits past the prefix: which range was meant? As `ip route` does, refused.
        assert_eq!(
            "a=10.1.0.5/24".parse::<JobRule>().unwrap_err(),
            "'10.1.0.5/24' has host bits set (the range is 10.1.0.0/24)"
        );
        assert!("a=fd00::1/8".parse::<JobRule>().is_err());
        assert!("a=0.0.0.0/0".parse::<JobRule>().is_ok());
        // An address is the name of a job found by itself: not a rule's.
        assert!("10.2.0.1=10.1.0.0/24".parse::<JobRule>().is_err());
        assert!("fd00::1=fd00::/8".parse::<JobRule>().is_err());
    }

    #[test]
    fn flows_of_no_job_wait_each_for_its_own_end() {
        // A rule's host sending to a host outside it without a pause (each transmission
        // overlapping the next): counted as each ends, not held until they all pause.
        let rules = vec!["a=10.1.0.0/30".parse::<JobRule>().unwrap()];
        let mut s = Steps::new(rules, 2_000_000, 0, crate::defaults::MAX_JOBS);
        for i in 0..10u64 {
            s.offer(&tx("10.1.0.1", "10.9.9.9", i * 1_000_000, i * 1_000_000 + 1_500_000, |_| {}));
        }
        s.advance(5_000_000);
        // Those ending at 1.5, 2.5, 3.5 and 4.5 ms.
        assert_eq!((s.outside_jobs, s.pending.len()), (4, 6));
        s.finish(None);
        assert_eq!((s.outside_jobs, s.take_closed().len()), (10, 0));
    }

    #[test]
    fn a_rules_job_is_its_hosts_and_the_rest_are_grouped_apart() {
        // A ring of 10.1.0.1-4 whose rule names three of them (10.1.0.0/30: .0-.3), and a
        // pair of hosts no rule names; a second rule that matches nothing.
        let rules = ["a=10.1.0.0/30", "idle=10.9.0.0/16"].map(|r| r.parse::<JobRule>().unwrap()).to_vec();
        let mut s = Steps::new(rules, 2_000_000, 0, crate::defaults::MAX_JOBS);
        for (a, b) in [
            ("10.1.0.1", "10.1.0.2"),
            ("10.1.0.2", "10.1.0.3"),
            ("10.1.0.3", "10.1.0.4"),
            ("10.1.0.4", "10.1.0.1"),
        ] {
            s.offer(&tx(a, b, 1_000, 50_000, |_| {}));
        }
        s.offer(&tx("10.5.0.1", "10.5.0.2", 1_000, 40_000, |_| {}));
        s.offer(&tx("10.5.0.2", "10.5.0.1", 1_000, 45_000, |_| {}));
        s.finish(None);
        let steps = s.take_closed();
        // Job a: the two flows between its hosts; the two to and from 10.1.0.4 are in no
        // job (not in a job of 10.1.0.4's own either).
        let a: Vec<&Step> = steps.iter().filter(|x| x.job == "a").collect();
        assert_eq!((a.len(), a[0].flows), (1, 2));
        assert_eq!(s.jobs["a"].hosts, vec![ip("10.1.0.1"), ip("10.1.0.2"), ip("10.1.0.3")]);
        assert_eq!(s.outside_jobs, 2);
        let other: Vec<&Step> = steps.iter().filter(|x| x.job != "a").collect();
        assert_eq!(other.len(), 1);
        assert_eq!((other[0].job.as_str(), other[0].flows), ("10.5.0.1", 2));
        // The rule that matched nothing is reported, without a step.
        assert_eq!((s.jobs["idle"].steps, s.jobs["idle"].hosts.len()), (0, 0));
        assert_eq!(s.jobs.len(), 3);
        // The longest step exactly (the quantiles are to three digits).
        assert_eq!(s.jobs["10.5.0.1"].max_ns, 44_000);
    }

    #[test]
    fn jobs_whose_ranges_overlap_are_refused() {
        let rules = |r: &[&str]| r.iter().map(|r| r.parse::<JobRule>().unwrap()).collect::<Vec<_>>();
        let e = check_job_rules(&rules(&["a=10.0.0.0/8", "b=10.1.0.0/16"])).unwrap_err();
        assert_eq!(e, "--job b=10.1.0.0/16 overlaps --job a=10.0.0.0/8: a host belongs to one job");
        assert!(check_job_rules(&rules(&["a=10.1.0.0/16", "b=10.0.0.0/8"])).is_err());
        assert!(check_job_rules(&rules(&["a=10.1.2.3", "b=10.1.0.0/16,fd00::/8"])).is_err());
        // Apart, in two families, or one job's rules: no overlap between jobs.
        assert!(check_job_rules(&rules(&["a=10.1.0.0/16", "b=10.2.0.0/16", "c=fd00::/8"])).is_ok());
        assert!(check_job_rules(&rules(&["a=10.1.0.0/16", "a=10.1.2.0/24"])).is_ok());
    }

    #[test]
    fn a_ring_step_its_straggler_and_the_other_job() {
        let mut s = Steps::new(Vec::new(), 2_000_000, 0, crate::defaults::MAX_JOBS);
        // Job of 10.0.0.1-3, two steps; the second's straggler lost a packet.
        for (i, (a, b)) in
            [("10.0.0.1", "10.0.0.2"), ("10.0.0.2", "10.0.0.3"), ("10.0.0.3", "10.0.0.1")].iter().enumerate()
        {
            s.offer(&tx(a, b, 1_000, 50_000 + i as u64 * 1_000, |_| {}));
            let late = if i == 1 { 400_000 } else { 0 };
            s.offer(&tx(a, b, 10_000_000, 10_050_000 + late, |c| {
                if i == 1 {
                    c.retx_packets = 3
                }
            }));
        }
        // Another job beside it, one step.
        s.offer(&tx("10.9.0.1", "10.9.0.2", 5_000, 60_000, |c| c.ecn_ce = 2));
        s.offer(&tx("10.9.0.2", "10.9.0.1", 5_000, 40_000, |_| {}));
        s.finish(None);
        let steps = s.take_closed();
        assert_eq!(steps.len(), 3);
        let a: Vec<&Step> = steps.iter().filter(|x| x.job == "10.0.0.1").collect();
        assert_eq!(a.len(), 2);
        assert_eq!((a[0].start_ns, a[0].end_ns, a[0].flows), (1_000, 52_000, 3));
        assert_eq!(a[0].straggler.src, ip("10.0.0.3"));
        assert_eq!(a[0].lag_ns(), 1_000);
        assert_eq!(a[0].reason, Reason::None);
        assert_eq!(a[1].straggler.src, ip("10.0.0.2"));
        assert_eq!(a[1].lag_ns(), 400_000);
        assert_eq!(a[1].reason, Reason::Loss);
        let b = steps.iter().find(|x| x.job == "10.9.0.1").unwrap();
        assert_eq!((b.straggler.src, b.reason, b.lag_ns()), (ip("10.9.0.1"), Reason::Congestion, 20_000));
        assert_eq!(s.jobs["10.0.0.1"].steps, 2);
        assert_eq!(
            s.jobs["10.0.0.1"].stragglers[&(ip("10.0.0.2"), Reason::Loss)],
            Straggling { steps: 1, lag_ns: 400_000 }
        );
    }

    #[test]
    fn jobs_beyond_max_jobs_write_their_steps_without_run_totals() {
        // Room for two jobs: a rule's job and the first job found. Three pairs found, one
        // step each, closed one at a time (10.0.1.x, then 10.0.2.x, then 10.0.3.x): the
        // second and third have no totals, their steps are written all the same.
        let rules = vec!["llm=10.5.0.0/16".parse().unwrap()];
        let mut s = Steps::new(rules, 2_000_000, 0, 2);
        for (k, net) in ["10.0.1", "10.0.2", "10.0.3"].iter().enumerate() {
            let t0 = k as u64 * 10_000_000;
            s.offer(&tx(&format!("{net}.1"), &format!("{net}.2"), t0 + 1_000, t0 + 50_000, |_| {}));
            s.advance(t0 + 5_000_000);
        }
        let names: Vec<String> = s.take_closed().into_iter().map(|x| x.job).collect();
        assert_eq!(names, ["10.0.1.1", "10.0.2.1", "10.0.3.1"]);
        assert_eq!(s.jobs.keys().collect::<Vec<_>>(), ["10.0.1.1", "llm"]);
        let b = s.bound().unwrap();
        // All four at once would have needed 4.
        assert_eq!((b.option.as_str(), b.limit, b.lost, b.needed), ("--max-jobs", 2, 2, Some(4)));
        // A flow joins 10.0.3.x (no totals) to 10.0.1.x (totals): one job, named by the
        // first, with totals; its later steps count in them. 10.0.2.x stays without.
        s.offer(&tx("10.0.3.2", "10.0.1.2", 40_000_000, 40_050_000, |_| {}));
        s.offer(&tx("10.0.2.1", "10.0.2.2", 40_000_000, 40_050_000, |_| {}));
        s.finish(None);
        let names: Vec<String> = s.take_closed().into_iter().map(|x| x.job).collect();
        assert_eq!(names, ["10.0.1.1", "10.0.2.1"]);
        assert_eq!(s.jobs["10.0.1.1"].steps, 2);
        assert_eq!(s.jobs.len(), 2);
        assert_eq!(s.jobs_not_kept, 1);
        let b = s.bound().unwrap();
        assert_eq!((b.lost, b.needed), (3, Some(4)));
    }

    #[test]
    fn a_found_job_keeps_the_name_of_its_first_step_whatever_the_interval() {
        // Each case run twice: its first steps closed before the last transmissions come
        // (a short --interval), and every step closed at the end (a long one). A job used
        // to be named by its lowest address when each step closed: it changed name mid-run
        // when a lower host joined, and the two runs differed.
        let run = |ts: &[Transmission], close_before: usize, early: bool| {
            let mut s = Steps::new(Vec::new(), 2_000_000, 0, crate::defaults::MAX_JOBS);
            for (k, t) in ts.iter().enumerate() {
                if early && k == close_before {
                    s.advance(5_000_000);
                }
                s.offer(t);
            }
            s.finish(None);
            let names: Vec<String> = s.take_closed().into_iter().map(|x| x.job).collect();
            (names, s)
        };
        let keys = |s: &Steps| s.jobs.keys().cloned().collect::<Vec<_>>();
        // A ring whose lowest host, 10.0.0.1, sends only from its second step on: the job
        // is named by its first step's hosts (10.0.0.2, 10.0.0.3), and keeps the name.
        let ring = [
            tx("10.0.0.2", "10.0.0.3", 1_000, 50_000, |_| {}),
            tx("10.0.0.3", "10.0.0.2", 1_000, 40_000, |_| {}),
            tx("10.0.0.1", "10.0.0.2", 10_000_000, 10_050_000, |_| {}),
            tx("10.0.0.3", "10.0.0.1", 10_000_000, 10_040_000, |_| {}),
        ];
        for early in [true, false] {
            let (names, s) = run(&ring[..], 2, early);
            assert_eq!(names, ["10.0.0.2", "10.0.0.2"], "early {early}");
            assert_eq!(keys(&s), ["10.0.0.2"], "early {early}");
            let j = &s.jobs["10.0.0.2"];
            assert_eq!((j.steps, j.hosts.clone()), (2, vec![ip("10.0.0.1"), ip("10.0.0.2"), ip("10.0.0.3")]));
        }
        // Two pairs, 10.0.0.5-6 from 1 µs and 10.0.0.3-4 from 3 ms (apart by more than the
        // step gap), then a flow 10.0.0.6 -> 10.0.0.3 at 10 ms joins them. Closed early,
        // each pair's step is its own job; joined, the one named first (10.0.0.5, whose
        // first step started first, though 10.0.0.3 is lower) keeps its name and takes in
        // the other's totals. Closed at the end, the joined job's first step is the
        // 10.0.0.5-6 one: the same name and totals. Only the row of 10.0.0.3-4's step,
        // written before the join, differs.
        let pairs = [
            tx("10.0.0.5", "10.0.0.6", 1_000, 50_000, |_| {}),
            tx("10.0.0.6", "10.0.0.5", 1_000, 40_000, |_| {}),
            tx("10.0.0.3", "10.0.0.4", 3_000_000, 3_060_000, |_| {}),
            tx("10.0.0.4", "10.0.0.3", 3_000_000, 3_040_000, |_| {}),
            tx("10.0.0.6", "10.0.0.3", 10_000_000, 10_050_000, |_| {}),
        ];
        for (early, second) in [(true, "10.0.0.3"), (false, "10.0.0.5")] {
            let (names, s) = run(&pairs[..], 4, early);
            assert_eq!(names, ["10.0.0.5", second, "10.0.0.5"], "early {early}");
            assert_eq!(keys(&s), ["10.0.0.5"], "early {early}");
            let j = &s.jobs["10.0.0.5"];
            assert_eq!(j.steps, 3);
            assert_eq!(j.hosts, ["10.0.0.3", "10.0.0.4", "10.0.0.5", "10.0.0.6"].map(ip));
            // Steps of 49, 60 and 50 µs; lags 10 µs (10.0.0.5: 50 vs 40 µs), 20 µs
            // (10.0.0.3: 3,060 vs 3,040 µs) and 0 (10.0.0.6 alone).
            assert_eq!((j.max_ns, j.durations.quantile(0.5)), (60_000, Some(50_000)));
            let stragglers: Vec<_> =
                j.stragglers.iter().map(|(&(h, r), x)| (h, r, x.steps, x.lag_ns)).collect();
            assert_eq!(
                stragglers,
                [
                    (ip("10.0.0.3"), Reason::None, 1, 20_000),
                    (ip("10.0.0.5"), Reason::None, 1, 10_000),
                    (ip("10.0.0.6"), Reason::None, 1, 0)
                ]
            );
            assert_eq!(j.last.as_ref().map(|l| l.start_ns), Some(10_000_000));
        }
    }

    #[test]
    fn a_step_of_one_packet_has_a_rate_a_link_can_carry() {
        // It was divided by 1 ns: 32,768 Gbit/s for one 4 KiB packet. Now by one packet's
        // time at 100 Gb/s: 4,200 bytes are 336 ns; 4,096 payload bytes over it.
        let mut s = Steps::new(Vec::new(), 2_000_000, 0, crate::defaults::MAX_JOBS);
        s.offer(&tx("10.0.0.1", "10.0.0.2", 5_000, 5_000, |c| {
            (c.packets, c.bytes, c.payload_bytes, c.messages) = (1, 4_200, 4_096, 1)
        }));
        s.finish(None);
        let step = &s.take_closed()[0];
        assert_eq!(step.straggler_gbps, 4_096.0 * 8.0 / 336.0);
        assert_eq!(step.median_gbps, step.straggler_gbps);
    }

    #[test]
    fn step_durations_are_exact_then_a_histogram() {
        let mut d = StepDurations::Exact(Vec::new());
        assert_eq!(d.quantile(0.5), None);
        // 1..=1024 µs: nearest rank, exact.
        for k in (1..=1_024u64).rev() {
            d.record(k * 1_000);
        }
        assert!(matches!(d, StepDurations::Exact(_)));
        assert_eq!((d.quantile(0.5), d.quantile(0.99)), (Some(512_000), Some(1_014_000)));
        // The 1,025th: a histogram of the same values, to three significant digits (a
        // quantile is the highest value of its bucket).
        d.record(1_025_000);
        let StepDurations::Histogram(h) = &d else { panic!("a histogram") };
        assert_eq!(h.len(), 1_025);
        assert_eq!(d.quantile(0.5), Some(h.highest_equivalent(513_000)));
        assert!(d.quantile(0.5).unwrap().abs_diff(513_000) * 1_000 <= 513_000);
        // Two jobs' durations taken together (two found jobs joined): exact while 1,024 in
        // all, then a histogram of them all, whichever side held one.
        let exact = |r: std::ops::RangeInclusive<u64>| StepDurations::Exact(r.map(|k| k * 1_000).collect());
        let mut m = exact(1..=600);
        m.merge(exact(601..=1_024));
        assert!(matches!(&m, StepDurations::Exact(v) if v.len() == 1_024));
        assert_eq!((m.quantile(0.5), m.quantile(0.99)), (Some(512_000), Some(1_014_000)));
        let mut e = exact(1_025..=1_026);
        e.merge(d.clone());
        assert!(matches!(&e, StepDurations::Histogram(h) if h.len() == 1_027));
        m.merge(e);
        assert!(matches!(&m, StepDurations::Histogram(h) if h.len() == 2_051));
        let mut both = d.clone();
        both.merge(m);
        assert!(matches!(&both, StepDurations::Histogram(h) if h.len() == 3_076));
    }

    #[test]
    fn a_nak_is_a_reason_only_on_the_stragglers_own_qp() {
        // Two QPs between the same two hosts, as NCCL opens: an RNR NAK answering QP 0x301
        // is no reason for the straggler on QP 0x300 (it used to be, matched by hosts).
        let on = |qp: u32, mut t: Transmission| {
            t.key.dst_qpn = qp;
            t
        };
        let nak = |answers: Option<u32>| {
            let mut t = tx("10.0.0.2", "10.0.0.1", 20_000, 30_000, |c| {
                c.messages = 0;
                c.nak_rnr = 1;
            });
            t.key.dst_qpn = 0x11;
            t.peer_qpn = answers;
            t
        };
        for (answers, reason) in
            [(Some(0x301), Reason::None), (Some(0x300), Reason::Nak), (None, Reason::Nak)]
        {
            let mut s = Steps::new(Vec::new(), 2_000_000, 0, crate::defaults::MAX_JOBS);
            s.offer(&on(0x300, tx("10.0.0.1", "10.0.0.2", 1_000, 90_000, |_| {})));
            s.offer(&on(0x301, tx("10.0.0.1", "10.0.0.2", 1_000, 40_000, |_| {})));
            s.offer(&on(0x302, tx("10.0.0.2", "10.0.0.1", 1_000, 30_000, |_| {})));
            s.offer(&nak(answers));
            s.finish(None);
            let step = &s.take_closed()[0];
            assert_eq!((step.straggler.dst_qpn, step.reason), (0x300, reason), "{answers:?}");
        }
        // A NAK sent by a flow that sends messages of its own (both sides of the QP send)
        // counts too: it was left out.
        let mut s = Steps::new(Vec::new(), 2_000_000, 0, crate::defaults::MAX_JOBS);
        s.offer(&on(0x300, tx("10.0.0.1", "10.0.0.2", 1_000, 90_000, |_| {})));
        let mut both = tx("10.0.0.2", "10.0.0.1", 1_000, 30_000, |c| c.nak_seq = 1);
        both.peer_qpn = Some(0x300);
        s.offer(&both);
        s.finish(None);
        assert_eq!(s.take_closed()[0].reason, Reason::Nak);
    }

    #[test]
    fn a_step_waits_until_every_worker_is_past_it() {
        let mut progress = crate::metrics::totals::Progress::new(2);
        let mut s = Steps::new(Vec::new(), 2_000_000, 1_000_000, crate::defaults::MAX_JOBS);
        s.offer(&tx("10.0.0.1", "10.0.0.2", 0, 50_000, |_| {}));
        progress.note(0, 5_000_000);
        s.advance(progress.done());
        assert!(s.take_closed().is_empty(), "worker 1 has not reported yet");
        progress.note(1, 500_000);
        s.advance(progress.done());
        assert!(s.take_closed().is_empty(), "worker 1 is not past the step's settle time");
        // A flow of the same step from the slower worker's side comes late.
        s.offer(&tx("10.0.0.2", "10.0.0.1", 0, 80_000, |_| {}));
        progress.note(1, 5_000_000);
        s.advance(progress.done());
        let steps = s.take_closed();
        assert_eq!(steps.len(), 1);
        assert_eq!((steps[0].flows, steps[0].end_ns), (2, 80_000));
    }

    /// After the clock stepped back, a later interval carries a transmission of an earlier
    /// time. One worker hands it over after it reported the interval that closed the step
    /// before it, so it is a step of its own. With two workers the stats side may get it
    /// first, from the worker ahead: it still waits for its interval.
    #[test]
    fn a_transmission_waits_until_every_worker_reported_its_interval() {
        let mut progress = crate::metrics::totals::Progress::new(2);
        let mut s = Steps::new(Vec::new(), 2_000_000, 1_000_000, crate::defaults::MAX_JOBS);
        // Worker 0, interval ending at 5 ms: a transmission at 0-50 us.
        s.offer_reported(&tx("10.0.0.1", "10.0.0.2", 0, 50_000, |_| {}), 5_000_000);
        progress.note(0, 5_000_000);
        s.advance(progress.done());
        // Worker 0 goes on past a step back: in its interval ending at 9 ms, a
        // transmission at 60-80 us (within the step gap of the first).
        s.offer_reported(&tx("10.0.0.3", "10.0.0.4", 60_000, 80_000, |_| {}), 9_000_000);
        assert!(s.take_closed().is_empty(), "worker 1 has not reported yet");
        // Not pending yet either: one worker's stats side would not have them.
        assert_eq!(s.oldest_pending_ns(), None);
        // Worker 1 reports the interval ending at 5 ms: the first step closes without the
        // second transmission.
        progress.note(1, 5_000_000);
        s.advance(progress.done());
        let steps = s.take_closed();
        assert_eq!(steps.len(), 1);
        assert_eq!((steps[0].flows, steps[0].start_ns, steps[0].end_ns), (1, 0, 50_000));
        assert_eq!(s.oldest_pending_ns(), None);
        progress.note(0, 9_000_000);
        progress.note(1, 9_000_000);
        s.advance(progress.done());
        let steps = s.take_closed();
        assert_eq!(steps.len(), 1);
        assert_eq!((steps[0].flows, steps[0].start_ns, steps[0].end_ns), (1, 60_000, 80_000));
    }

    /// The same, with the slower worker's reports of both intervals coming at once: the
    /// steps close interval by interval, as one worker's reports close them, each close
    /// followed by a write of its own.
    #[test]
    fn transmissions_waiting_for_several_intervals_close_interval_by_interval() {
        let mut progress = crate::metrics::totals::Progress::new(2);
        let mut s = Steps::new(Vec::new(), 2_000_000, 1_000_000, crate::defaults::MAX_JOBS);
        s.offer_reported(&tx("10.0.0.1", "10.0.0.2", 0, 50_000, |_| {}), 5_000_000);
        s.offer_reported(&tx("10.0.0.3", "10.0.0.4", 60_000, 80_000, |_| {}), 9_000_000);
        s.offer_reported(&tx("10.0.0.3", "10.0.0.4", 8_000_000, 8_100_000, |_| {}), 9_000_000);
        progress.note(0, 9_000_000);
        s.advance(progress.done());
        assert!(s.take_writes().iter().all(|(closed, _)| closed.is_empty()));
        progress.note(1, 9_000_000);
        s.advance(progress.done());
        let writes: Vec<_> = s
            .take_writes()
            .into_iter()
            .map(|(closed, open_from)| {
                (closed.iter().map(|c| (c.start_ns, c.end_ns)).collect::<Vec<_>>(), open_from)
            })
            .collect();
        assert_eq!(
            writes,
            [
                // The second interval's transmissions had not come yet at one worker.
                (vec![(0, 50_000)], None),
                (vec![(60_000, 80_000)], Some(8_000_000)),
                (vec![], Some(8_000_000)),
            ]
        );
    }

    /// One worker closes steps at every interval it reports, also one without
    /// transmissions (an I/O timed out in it). With two workers, only one of which
    /// reported that interval, the close is made there all the same once both are past it.
    #[test]
    fn steps_close_at_an_interval_only_one_worker_reported() {
        let mut progress = crate::metrics::totals::Progress::new(2);
        let mut s = Steps::new(Vec::new(), 2_000_000, 1_000_000, crate::defaults::MAX_JOBS);
        let mut report = |s: &mut Steps, worker, end| {
            progress.note(worker, end);
            s.reported(end);
            s.advance(progress.done());
        };
        s.offer_reported(&tx("10.0.0.1", "10.0.0.2", 0, 50_000, |_| {}), 1_000_000);
        report(&mut s, 0, 1_000_000);
        report(&mut s, 0, 3_000_000);
        // After a step back: a transmission 10 us after the first, in the interval ending
        // at 10 ms.
        s.offer_reported(&tx("10.0.0.2", "10.0.0.1", 60_000, 80_000, |_| {}), 10_000_000);
        report(&mut s, 0, 10_000_000);
        report(&mut s, 1, 1_000_000);
        report(&mut s, 1, 10_000_000);
        let steps = s.take_closed();
        assert_eq!(
            steps.iter().map(|c| (c.flows, c.start_ns, c.end_ns)).collect::<Vec<_>>(),
            [(1, 0, 50_000), (1, 60_000, 80_000)]
        );
    }

    #[test]
    fn a_job_that_never_pauses_stays_within_the_bound() {
        let mut s = Steps::new(Vec::new(), 2_000_000, 0, crate::defaults::MAX_JOBS);
        // Transmissions overlapping one another without end: one step that never closes.
        for k in 0..(MAX_PENDING as u64 + 10) {
            s.offer(&tx("10.0.0.1", "10.0.0.2", k * 1_000, k * 1_000 + 5_000, |_| {}));
            assert!(s.pending.len() <= MAX_PENDING);
        }
        let closed = s.take_closed();
        assert_eq!(closed.len(), 1, "the oldest step closed early once");
        assert_eq!(closed[0].start_ns, 0);
    }

    #[test]
    fn a_job_of_short_steps_at_the_bound_closes_a_quarter_at_once() {
        let mut s = Steps::new(Vec::new(), 2_000_000, 0, crate::defaults::MAX_JOBS);
        // Steps of four flows each, 3 ms apart (a gap longer than --step-gap): 65,536 steps
        // fill the bound; the next transmission closes the oldest 16,384 of them (a quarter
        // of the 262,144 pending), not one.
        let flows = [
            ("10.0.0.1", "10.0.0.2"),
            ("10.0.0.2", "10.0.0.3"),
            ("10.0.0.3", "10.0.0.4"),
            ("10.0.0.4", "10.0.0.1"),
        ];
        for k in 0..MAX_PENDING as u64 / 4 {
            for (a, b) in flows {
                s.offer(&tx(a, b, k * 3_000_000, k * 3_000_000 + 10_000, |_| {}));
            }
        }
        assert_eq!((s.pending.len(), s.closed.len()), (MAX_PENDING, 0));
        s.offer(&tx("10.0.0.1", "10.0.0.2", 1 << 40, (1 << 40) + 10_000, |_| {}));
        assert_eq!(s.pending.len(), MAX_PENDING - MAX_PENDING / 4 + 1);
        let closed = s.take_closed();
        assert_eq!(closed.len(), 16_384);
        assert_eq!((closed[16_383].start_ns, closed[16_383].flows), (16_383 * 3_000_000, 4));
    }

    #[test]
    fn transmissions_that_come_after_a_close_are_put_in_order_among_those_waiting() {
        let mut s = Steps::new(Vec::new(), 2_000_000, 1_000_000, crate::defaults::MAX_JOBS);
        s.offer(&tx("10.0.0.1", "10.0.0.2", 10_000, 20_000, |_| {}));
        s.offer(&tx("10.9.0.1", "10.9.0.2", 10_000, 20_000, |_| {}));
        s.advance(500_000);
        assert!(s.take_closed().is_empty());
        // Later reports: a flow of the same step that started before the waiting one, and
        // one 5 ms after it (the next step).
        s.offer(&tx("10.0.0.2", "10.0.0.1", 5_000, 30_000, |_| {}));
        s.offer(&tx("10.0.0.1", "10.0.0.2", 5_020_000, 5_030_000, |_| {}));
        s.finish(None);
        let a: Vec<(u64, u64, usize)> = s
            .take_closed()
            .iter()
            .filter(|x| x.job == "10.0.0.1")
            .map(|x| (x.start_ns, x.end_ns, x.flows))
            .collect();
        assert_eq!(a, [(5_000, 30_000, 2), (5_020_000, 5_030_000, 1)]);
    }

    #[test]
    fn a_list_waiting_and_new_in_order_and_two_waiting_parts_joined() {
        let m = |start: u64| Member::of(&tx("10.0.0.1", "10.0.0.2", start, start + 1, |_| {}));
        let starts = |v: &[Member]| v.iter().map(|m| m.start_ns).collect::<Vec<_>>();
        // Waiting 1, 5, 9; new 3, 4, 10.
        let buf = &mut Vec::new();
        let mut v: Vec<Member> = [1, 5, 9, 3, 4, 10].into_iter().map(m).collect();
        in_order(&mut v, 3, buf);
        assert_eq!(starts(&v), [1, 3, 4, 5, 9, 10]);
        // Every new one after those waiting: nothing moves.
        let mut v: Vec<Member> = [1, 2, 7, 8].into_iter().map(m).collect();
        in_order(&mut v, 2, buf);
        assert_eq!(starts(&v), [1, 2, 7, 8]);
        // Two jobs' waiting parts joined into one job (5, 1), then a new one.
        let mut v: Vec<Member> = [5, 1, 2].into_iter().map(m).collect();
        in_order(&mut v, 2, buf);
        assert_eq!(starts(&v), [1, 2, 5]);
        // Every new one before those waiting; then new ones among and after them, one with
        // the start of a waiting one (the end breaks the tie).
        let mut v: Vec<Member> = [7, 8, 9, 1, 2].into_iter().map(m).collect();
        in_order(&mut v, 3, buf);
        assert_eq!(starts(&v), [1, 2, 7, 8, 9]);
        let mut v: Vec<Member> = [2, 4, 6, 1, 4, 5, 9].into_iter().map(m).collect();
        v[4].end_ns = 1;
        in_order(&mut v, 3, buf);
        assert_eq!(starts(&v), [1, 2, 4, 4, 5, 6, 9]);
        assert_eq!((v[2].end_ns, v[3].end_ns), (1, 5), "a tie of starts ordered by end");
    }

    #[test]
    fn a_waiting_transmission_of_a_connection_later_found_carrying_nvme_is_no_step() {
        let mut s = Steps::new(Vec::new(), 2_000_000, 1_000_000, crate::defaults::MAX_JOBS);
        // The host's QP 0x10 sends to the target's QP 0x20 (paired).
        s.offer(&Transmission {
            peer_qpn: Some(0x10),
            ..tx_qp("10.0.0.1", "10.0.0.2", 0x20, 0, 1_000, |_| {})
        });
        s.offer(&tx("10.0.0.3", "10.0.0.4", 0, 1_000, |_| {}));
        // Not settled yet: both wait, joined to their hosts' groups.
        s.advance(500_000);
        assert!(s.take_closed().is_empty());
        assert_eq!(s.pending.len(), 2);
        // The connection's completions show up afterwards, sent to the host's QP (unpaired):
        // its waiting transmission is storage.
        s.offer(&tx_qp("10.0.0.2", "10.0.0.1", 0x10, 2_000, 3_000, |c| c.nvme_completions = 1));
        s.offer(&tx("10.0.0.3", "10.0.0.4", 5_000, 6_000, |_| {}));
        s.finish(None);
        let closed = s.take_closed();
        assert_eq!(closed.len(), 1, "{closed:?}");
        assert_eq!((closed[0].job.as_str(), closed[0].flows, closed[0].end_ns), ("10.0.0.3", 1, 6_000));
        assert_eq!(s.dropped, 0);
    }

    #[test]
    fn acks_nvme_and_the_storage_vantage_are_not_steps() {
        let mut s = Steps::new(Vec::new(), 2_000_000, 0, crate::defaults::MAX_JOBS);
        // Commands from the host's QP 0x10 (paired) to the target's 0x20.
        s.offer(&Transmission {
            peer_qpn: Some(0x10),
            ..tx_qp("10.0.0.1", "10.0.0.2", 0x20, 0, 1_000, |c| c.nvme_commands = 1)
        });
        // The target's RDMA WRITE of read data on the same connection (to the host's QP,
        // not paired): storage too; and the host's READ responses to the target's QP.
        s.offer(&tx_qp("10.0.0.2", "10.0.0.1", 0x10, 500, 900, |_| {}));
        s.offer(&tx_qp("10.0.0.1", "10.0.0.2", 0x20, 2_000, 2_500, |_| {}));
        s.offer(&tx("10.0.0.1", "10.0.0.2", 0, 1_000, |c| c.messages = 0));
        let mut storage = tx("10.0.0.1", "10.0.0.2", 0, 1_000, |_| {});
        storage.key.vantage = Vantage::Storage;
        s.offer(&storage);
        s.finish(None);
        assert!(s.take_closed().is_empty());
    }

    #[test]
    fn a_collective_beside_an_nvme_connection_between_the_same_hosts_is_a_step() {
        let mut s = Steps::new(Vec::new(), 2_000_000, 0, crate::defaults::MAX_JOBS);
        // NVMe between the two hosts, on QPs 0x1100 (host) and 0x1200 (target), both ways.
        s.offer(&tx_qp("10.0.0.1", "10.0.0.2", 0x1200, 0, 1_000, |c| c.nvme_commands = 1));
        s.offer(&tx_qp("10.0.0.2", "10.0.0.1", 0x1100, 0, 1_000, |c| c.nvme_completions = 1));
        // The ring's WRITEs on other QPs (0x180 and 0x181, paired with each other), the
        // same hosts, the same time: one step of two flows, ending at the later one.
        s.offer(&Transmission {
            peer_qpn: Some(0x181),
            ..tx_qp("10.0.0.1", "10.0.0.2", 0x180, 0, 1_000, |_| {})
        });
        s.offer(&Transmission {
            peer_qpn: Some(0x180),
            ..tx_qp("10.0.0.2", "10.0.0.1", 0x181, 100, 1_500, |_| {})
        });
        s.finish(None);
        let closed = s.take_closed();
        assert_eq!(closed.len(), 1, "{closed:?}");
        assert_eq!((closed[0].flows, closed[0].start_ns, closed[0].end_ns), (2, 0, 1_500));
        assert_eq!(s.dropped, 0);
    }
}
