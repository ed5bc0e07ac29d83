//! The mq-sweep headline, tables and charts, from the observations and
//! the designs alone.

use crate::chart::bars::{Bars, Row as Bar};
use crate::chart::{Chart, Meaning};
use crate::engine::Observations;
use crate::report::{Headline, HeadlineBuilder};
use crate::stats::Summary;
use crate::table::{Column, Table, col, range_or_dash};

use super::{Data, Design, FLOOR, Offer, article, open_pipeline};

/// The results as the tables read them: the designs, the observations.
#[derive(Clone, Copy)]
struct View<'a> {
    d: &'a Data,
    obs: Observations<'a>,
}

/// A row of a table: what it says, and its condition.
type Line = (String, String);

/// Which designs a figure takes.
type Keep<'k> = &'k dyn Fn(&Design) -> bool;

impl<'a> View<'a> {
    /// The designs that ran at `offer`, in their order (round 1's).
    fn designs(&self, offer: Offer) -> Vec<&'a Design> {
        let at = offer.at();
        let mut first: Vec<_> =
            self.obs.at(&at).filter(|o| o.round == Some(1)).collect();
        first.sort_by_key(|o| o.position);
        let design = |c: &str| self.d.designs.iter().find(|d| d.condition == c);
        first.iter().filter_map(|o| design(&o.condition)).collect()
    }

    /// The rounds run at `offer`.
    fn rounds(&self, offer: Offer) -> usize {
        self.obs.at(&offer.at()).filter_map(|o| o.round).max().unwrap_or(0)
    }

    fn summary(&self, offer: Offer, key: &str, metric: &str) -> Option<Summary> {
        self.obs.summary(&offer.at(), key, metric)
    }

    fn median(&self, offer: Offer, key: &str, metric: &str) -> f64 {
        self.obs.median(&offer.at(), key, metric).unwrap_or(f64::NAN)
    }

    /// The median of `metric`'s rounds with its 95% interval, as the
    /// headline figures have: `157457 [141514, 168688]`; `-` for none.
    fn cell(&self, offer: Offer, key: &str, metric: &str, digits: usize) -> String {
        self.summary(offer, key, metric).map_or("-".into(), |s| interval(&s, digits))
    }

    /// Per round, the best msg/s among the designs at `offer` that `keep`
    /// selects (all ran in that round), and the design that gave it.
    fn best(&self, offer: Offer, keep: Keep) -> Option<Vec<(&'a Design, f64)>> {
        let designs: Vec<&Design> =
            self.designs(offer).into_iter().filter(|d| keep(d)).collect();
        let names: Vec<&str> =
            designs.iter().map(|d| d.condition.as_str()).collect();
        let best = self.obs.best(&offer.at(), &names, MSGS)?;
        Some(best.into_iter().map(|(k, v)| (designs[k], v)).collect())
    }

    /// [`View::best`] without who gave it.
    fn best_of(&self, offer: Offer, keep: Keep) -> Option<Vec<f64>> {
        Some(self.best(offer, keep)?.into_iter().map(|(_, v)| v).collect())
    }

    /// `metric` at `at` of each design `keep` selects, by its threads: a
    /// chart's points.
    fn by_threads(
        &self,
        at: Offer,
        keep: Keep,
        metric: &str,
    ) -> Vec<(f64, Summary)> {
        let of = self.designs(at).into_iter().filter(|x| keep(x));
        let point = |x: &Design| {
            Some((f64::from(x.threads), self.summary(at, &x.condition, metric)?))
        };
        of.filter_map(point).collect()
    }

    /// Each row of a design at `offer`: its label at that offer, with ` *`
    /// when `mark`ed and it has more threads than the CPUs allowed.
    fn lines(&self, offer: Offer, mark: bool) -> Vec<Line> {
        let star = |d: &Design| if mark && d.above_cpus { " *" } else { "" };
        let line = |d: &&Design| {
            (format!("{}{}", label(d, offer), star(d)), d.condition.clone())
        };
        self.designs(offer).iter().map(line).collect()
    }
}

/// The metrics the headline reads most.
const MSGS: &str = "messages_per_s";
const SHARE: &str = "switch_share_pct";

/// A design's label at an offer.
fn label(d: &Design, offer: Offer) -> String {
    match (offer.pipeline, offer.rate) {
        (1, 0) => d.label.clone(),
        (n, 0) => format!("{}, {n} per write", d.label),
        (n, r) => format!("{}, {n} per write, at {r} msg/s", d.label),
    }
}

/// Median [95% interval] of a summary of rounds (the rounds' whole range
/// when they are too few for 95%).
fn interval(s: &Summary, digits: usize) -> String {
    let [lo, hi] = s.interval;
    format!("{:.digits$} [{lo:.digits$}, {hi:.digits$}]", s.median)
}

/// The load, as a table's title says it: `100 senders, ..., 1 s per run`,
/// with `offered` (how fast) after the message size.
fn load(d: &Data, offered: &str) -> String {
    let Data { senders, receivers, queues, size, duration_s, .. } = d;
    format!(
        "{senders} senders, {receivers} receivers, {queues} queues, \
         {size}-byte messages{offered}, {duration_s} s per run"
    )
}

/// The sweep at one message per write (at the rate asked).
fn one(d: &Data) -> Offer {
    Offer { pipeline: 1, rate: d.rate }
}

/// The figures the claims are judged on: throughput and switching share at
/// 10 and 100 threads per pool, the best pool size, the event loop, each
/// broker's best and their ratios, each server's fewest threads against
/// more; then for each --pipeline, its floor and (above 1) the same
/// comparisons at it (keys ending in `_p<N>`); then the open-loop point's
/// latencies.
pub(super) fn headline(d: &Data, obs: Observations) -> Headline {
    let v = View { d, obs };
    let at = one(d);
    let mut h = crate::report::headline();
    for (key, label, metric, unit) in [
        ("messages_per_s", "{t} threads per pool", MSGS, "msg/s"),
        ("switch_share", "switching's share of broker CPU, {t} threads", SHARE, "%"),
    ] {
        for t in [10, 100] {
            let rounds = obs.rounds(&at.at(), &format!("threads-{t}"), metric);
            let label = label.replace("{t}", &t.to_string());
            h = h.rounds(&format!("{key}_{t}"), &label, rounds, unit);
        }
    }
    let el = obs.rounds(&at.at(), "event-loop", MSGS);
    h = h.rounds("event_loop_messages_per_s", "the epoll event loop", el, "msg/s");
    h = compared(h, v, at);
    // Each server's fewest threads (1) over more, the better design of each.
    for (key, mode, more, label) in [
        (
            "redis_one_over_two",
            "redis",
            2,
            "Redis: io-threads 1 over 2 (the better of reads or not)",
        ),
        (
            "redis_one_over_four",
            "redis",
            4,
            "Redis: io-threads 1 over 4 (above the CPUs)",
        ),
        ("nats_one_over_two", "nats", 2, "NATS: GOMAXPROCS 1 over 2"),
    ] {
        let of = |t: u32| v.best_of(at, &|x| x.mode == mode && x.threads == t);
        let label = format!("{label}, in the same round");
        h = h.paired(key, &label, of(1), of(more));
    }
    for &n in &d.pipeline {
        let offer = Offer { pipeline: n, rate: d.rate };
        let floor = obs.rounds(&offer.at(), FLOOR, MSGS);
        h = h.rounds(
            &format!("floor_messages_per_s_p{n}"),
            &format!("the floor at {n} per write: two loopback hops on the CPUs allowed, no broker"),
            floor.clone(),
            "msg/s",
        );
        if n > 1 {
            let ours = v.best_of(offer, &Design::ours);
            let fraction = ours.zip(floor).map(|(o, f)| {
                o.iter().zip(f).map(|(o, f)| o / f.max(1e-9)).collect()
            });
            h = compared(h, v, offer).rounds(
                &format!("ours_fraction_of_floor_p{n}"),
                &format!("the lab broker's best at {n} per write over the floor of the same round"),
                fraction,
                "",
            );
        }
    }
    if let Some(open) = &d.open_loop {
        // The first design `keep` selects: the open-loop point runs one a broker.
        let p99 = |keep: Keep| {
            let x = v.designs(open.offer).into_iter().find(|x| keep(x))?;
            obs.rounds(&open.offer.at(), &x.condition, "p99_ms")
        };
        let (ours, nats) = (p99(&Design::ours), p99(&|x| x.mode == "nats"));
        h = h
            .exact("open_loop_rate", "the open-loop point's offered rate", Some(f64::from(open.offer.rate)), "msg/s")
            .rounds("open_loop_p99_ms_ours", "p99 at the open-loop point, the lab broker's best design", ours.clone(), "ms")
            .rounds("open_loop_p99_ms_redis", "p99 at the open-loop point, Redis", p99(&|x| x.mode == "redis"), "ms")
            .rounds("open_loop_p99_ms_nats", "p99 at the open-loop point, NATS", nats.clone(), "ms")
            .paired("open_loop_nats_over_ours_p99", "NATS's p99 over the lab broker's at the open-loop point, in the same round (at least 1: ours no worse)", nats, ours);
    }
    h.build()
}

/// The comparisons made at one message per write and at each pipeline
/// above 1 (keys ending in `_p<N>`): 10 threads per pool over 100, the best
/// pool size, each broker's best and the lab's over Redis's and NATS's.
fn compared(h: HeadlineBuilder, v: View, offer: Offer) -> HeadlineBuilder {
    let n = offer.pipeline;
    let (p, at, comma) = if n == 1 {
        (String::new(), String::new(), String::new())
    } else {
        (format!("_p{n}"), format!(" at {n} per write"), format!(", {n} per write"))
    };
    let rate = |t: &str| v.obs.rounds(&offer.at(), t, MSGS);
    let label = format!(
        "throughput at 10 threads per pool over 100{comma}, in the same round"
    );
    let (ten, hundred) = (rate("threads-10"), rate("threads-100"));
    let mut h = h.paired(&format!("ten_over_hundred{p}"), &label, ten, hundred);
    let pools = v.best(offer, &|x| x.mode == "threads");
    let sizes =
        pools.as_ref().map(|b| b.iter().map(|(x, _)| x.threads.into()).collect());
    let label = format!("threads per pool at the round's best throughput{comma}");
    h = h.rounds(&format!("best_pool{p}"), &label, sizes, "");
    let label = if n == 1 {
        "the round's best throughput over the pool sizes".to_string()
    } else {
        format!("the round's best pool size at {n} per write")
    };
    let rates = pools.map(|b| b.into_iter().map(|(_, v)| v).collect());
    h = h.rounds(&format!("best_pool_messages_per_s{p}"), &label, rates, "msg/s");
    let ours = v.best_of(offer, &Design::ours);
    let best = |mode: &str| v.best_of(offer, &|x| x.mode == mode);
    for (name, label, rounds) in [
        ("ours", "the lab broker's best design", ours.clone()),
        ("redis", "Redis's best setting", best("redis")),
        ("nats", "NATS's best setting", best("nats")),
    ] {
        let key = format!("{name}_best_messages_per_s{p}");
        h = h.rounds(&key, &format!("{label}{at}, each round"), rounds, "msg/s");
    }
    for (name, whose) in [("redis", "Redis's"), ("nats", "NATS's")] {
        let label = format!(
            "the lab broker's best over {whose} best{at}, in the same round"
        );
        let key = format!("ours_over_{name}{p}");
        h = h.paired(&key, &label, ours.clone(), best(name));
    }
    h
}

/// Three tables, each fitting the book's column with one line per row: the
/// throughput and switching the chapter compares with 2006 (each column
/// beside the article's figure), the broker's CPU and the latency, then
/// every broker on the same load, Redis and NATS beside the lab's.
pub(super) fn tables(d: &Data, obs: Observations) -> Vec<Table> {
    let (v, at) = (View { d, obs }, one(d));
    let ours: Vec<&Design> =
        v.designs(at).into_iter().filter(|x| x.ours()).collect();
    if ours.is_empty() {
        return vec![brokers(d, obs)]; // --brokers without lab: no pool to tabulate
    }
    let offered = if d.rate == 0 {
        " as fast as the broker takes them".to_string()
    } else {
        format!(" offered at {} messages/s", d.rate)
    };
    let title = format!("Threads per pool vs throughput: {}", load(d, &offered));
    let threads = |x: &&Design| match x.mode {
        "threads" => x.threads.to_string(),
        _ => "event loop (1)".into(),
    };
    let then = |x: &&Design| {
        if x.mode == "threads" { article(x.threads) } else { ("-", "-") }
    };
    let median = |metric: &'static str, digits: usize| {
        move |x: &&Design| format!("{:.digits$}", v.median(at, &x.condition, metric))
    };
    let t = Table::of(
        title,
        &ours,
        &[
            col("threads/pool", threads),
            col("msg/s", |x: &&Design| {
                range_or_dash(v.summary(at, &x.condition, MSGS), 0)
            }),
            col("2006 msg/s", |x| then(x).0.to_string()),
            col("switch share %", median("switch_share_pct", 1)),
            col("2006 switch share", |x| then(x).1.to_string()),
            col("switches/msg", median("switches_per_message", 3)),
        ],
    )
    .noted(format!(
        "Medians of {} round(s) (msg/s: median (min-max)). Switches are the \
         broker's voluntary+involuntary context switches (getrusage). Switch \
         share = switches x the cost of one switch / broker CPU time; a switch \
         cost {:.2} us: {}. The 2006 figures: the single-CPU server of the 2006 \
         message-queue post (see the book's References).",
        v.rounds(at),
        d.switch_cost.us,
        d.switch_cost.source
    ));
    let cost = Table::of(
        "The broker's CPU and the messages' latency",
        &ours,
        &[
            col("threads/pool", threads),
            col("broker CPU %", median("broker_cpu_pct", 0)),
            col("CPU us/msg", median("cpu_us_per_message", 2)),
            col("p50 ms", median("p50_ms", 1)),
            col("p99 ms", median("p99_ms", 1)),
        ],
    )
    .noted(
        "Medians of the rounds. Broker CPU % is its user+sys time (whole life, \
         set-up and drain included) over the sending window (first send to last \
         receipt); 100% is one core. CPU us/msg: the broker's CPU time per \
         message delivered. Latency is send to receipt; at saturation (no --rate) \
         it mostly measures the messages waiting in queues and socket buffers.",
    );
    vec![t, cost, brokers(d, obs)]
}

/// A column of a row's `metric` as median [interval], at `offer`.
fn cells<'a>(
    v: View<'a>,
    offer: Offer,
    header: &str,
    metric: &'a str,
    digits: usize,
) -> Column<'a, Line> {
    col(header, move |(_, key): &Line| v.cell(offer, key, metric, digits))
}

/// The columns every table of brokers has, at `offer`: the broker, msg/s,
/// the latencies to `digits`, and the broker's CPU per message.
fn broker_columns(
    v: View<'_>,
    offer: Offer,
    digits: usize,
) -> Vec<Column<'_, Line>> {
    vec![
        col("broker", |(line, _): &Line| line.clone()),
        cells(v, offer, "msg/s", MSGS, 0),
        cells(v, offer, "p50 ms", "p50_ms", digits),
        cells(v, offer, "p99 ms", "p99_ms", digits),
        cells(v, offer, "CPU us/msg", "cpu_us_per_message", 2),
    ]
}

/// Every broker on the same load: the lab's rows, then Redis's and NATS's,
/// each with its CPU per message and its voluntary and involuntary
/// switches per message, from its own counters.
pub(super) fn brokers(d: &Data, obs: Observations) -> Table {
    let (v, at) = (View { d, obs }, one(d));
    let mut columns = broker_columns(v, at, 1);
    columns.push(cells(v, at, "vol. sw/msg", "voluntary_per_message", 3));
    columns.push(cells(v, at, "invol. sw/msg", "involuntary_per_message", 3));
    let title =
        "Every broker on the same load: the lab's, Redis pub/sub and NATS core";
    let mut t = Table::of(title, &v.lines(at, true), &columns);
    let designs = v.designs(at);
    let servers = designs.iter().filter_map(|x| x.server.as_ref());
    let mut versions: Vec<String> =
        servers.map(|s| format!("{} {}", s.program, s.version)).collect();
    versions.dedup(); // each server's designs lie together
    t.note(format!(
        "{}, one pass over every broker per round. \
         The same load generator drives all: each sender and receiver a thread \
         with its own connection, one message per write; Redis receivers each \
         subscribe to a channel of their own that the senders of their queue take \
         in turn, NATS receivers form one queue group per queue. Redis and NATS \
         run with persistence off, each started for its point and stopped after \
         it; their CPU time and switches are the kernel's accounting of the whole \
         server (wait4), start-up included.{}{}",
        crate::stats::interval_note(v.rounds(at)),
        if versions.is_empty() { String::new() } else { format!(" Versions: {}.", versions.join(", ")) },
        if designs.iter().any(|x| x.above_cpus) {
            " * a thread count (per pool, io-threads, GOMAXPROCS) above the CPUs the \
             run was allowed."
        } else {
            ""
        }
    ));
    for m in &d.missing {
        t.note(format!(
            "{} is not installed here: `{}` adds its rows.",
            m.program, m.install
        ));
    }
    t
}

/// The page on pipelining: for each --pipeline above 1, every broker and
/// pool size with the columns of the sweep (intervals included) and the
/// generator's CPU beside the broker's, each rate as a fraction of the
/// floor; the floor itself; and the open-loop point.
pub(super) fn pipelined(d: &Data, obs: Observations) -> Vec<Table> {
    let v = View { d, obs };
    let mut out = Vec::new();
    for &n in d.pipeline.iter().filter(|&&n| n > 1) {
        let at = Offer { pipeline: n, rate: d.rate };
        let mut lines = v.lines(at, true);
        if lines.is_empty() {
            continue;
        }
        let floor = v.summary(at, FLOOR, MSGS).is_some();
        if floor {
            lines.push(("floor: the work alone, no broker".into(), FLOOR.into()));
        }
        let mut columns = broker_columns(v, at, 1);
        columns.insert(
            2,
            col("of floor", move |(_, key): &Line| {
                if key == FLOOR {
                    return "1".into();
                }
                let of = obs.paired(&at.at(), key, FLOOR, MSGS);
                of.and_then(|r| Summary::of(&r))
                    .map_or("-".into(), |s| interval(&s, 2))
            }),
        );
        columns.push(cells(v, at, "load us/msg", "load_cpu_us_per_message", 2));
        columns.push(cells(v, at, "sw/msg", "switches_per_message", 3));
        let title = format!("{n} messages per write: {}", load(d, ""));
        let mut t = Table::of(title, &lines, &columns);
        t.note(format!(
            "{}. Each sender \
             writes {n} messages per write (Redis: {n} PUBLISH commands, replies read \
             as they come; NATS: {n} PUB frames); receivers read 64 KiB at a time. \
             CPU us/msg is the broker's, load us/msg the load generator's own (all \
             its senders and receivers), per message delivered. The floor is the \
             work without a broker: a thread writing {n} messages per write to \
             another over loopback TCP, twice (sender to broker, broker to \
             receiver: the four copies of a message), on the CPUs the run was \
             allowed; its CPU us/msg is those two hops'. `of floor`: msg/s over the \
             floor of the same round.",
            crate::stats::interval_note(v.rounds(at))
        ));
        let pools = |o: Offer| -> Vec<u32> {
            let of = v.designs(o).into_iter().filter(|x| x.mode == "threads");
            of.map(|x| x.threads).collect()
        };
        let (here, all) = (pools(at), pools(one(d)));
        if !all.is_empty() && here != all {
            let list = |v: &[u32]| {
                v.iter().map(u32::to_string).collect::<Vec<_>>().join(", ")
            };
            t.note(format!(
                "At {n} per write only {} threads per pool ran (of {} at one per write): \
                 `lab run all` takes one pipelined point per design to stay within its \
                 time; `lab run mq-sweep` repeats the whole sweep.",
                if here.is_empty() { "no pool size of".to_string() } else { list(&here) },
                list(&all)
            ));
        }
        if floor {
            t.note(format!(
                "The four copies alone (memcpy of a message, user space): {} ns per message.",
                v.cell(at, FLOOR, "memcpy4_ns_per_message", 0)
            ));
        }
        out.push(t);
    }
    if let Some(open) = &d.open_loop {
        let (at, rate, n) = (open.offer, open.offer.rate, open.offer.pipeline);
        let title = format!("Open loop: {rate} messages/s offered, {n} per write");
        let t = Table::of(title, &v.lines(at, false), &broker_columns(v, at, 2));
        out.push(t.noted(format!(
            "The rate: {}. Each sender sends on a fixed schedule and stamps each \
             message with the time it was due, not the time it went out, so a \
             broker that makes senders wait shows it in the latency (no \
             coordinated omission).",
            open.rule
        )));
    }
    out
}

/// A design's meaning on the charts.
fn meaning(x: &Design) -> Meaning {
    match x.mode {
        "threads" => Meaning::Thread,
        "event-loop" => Meaning::EventLoop,
        "redis" => Meaning::Redis,
        _ => Meaning::Nats,
    }
}

/// Every broker's throughput at the open-loop point's pipeline (16 per
/// write, or the largest swept), one bar per design: median, whisker
/// min-max; the floor of the work, measured beside them, in the title.
pub(super) fn pipelined_chart(d: &Data, obs: Observations) -> Option<Bars> {
    let v = View { d, obs };
    let offer = |n| Offer { pipeline: n, rate: d.rate };
    let ran: Vec<u32> = d
        .pipeline
        .iter()
        .copied()
        .filter(|&n| n > 1 && !v.designs(offer(n)).is_empty())
        .collect();
    let n = open_pipeline(&ran)?;
    let at = offer(n);
    let title = match v.summary(at, FLOOR, MSGS) {
        Some(f) => format!(
            "{n} messages per write (the floor, no broker: {:.0} msg/s)",
            f.median
        ),
        None => format!("{n} messages per write"),
    };
    let rows = v.designs(at).into_iter().filter_map(|x| {
        let m = v.summary(at, &x.condition, MSGS)?;
        Some(Bar::summary(meaning(x), label(x, at), &m))
    });
    let unit = "messages/s: median, whisker min-max of the rounds";
    Some(Bars::new(&title, unit, false).group("", rows.collect()))
}

pub(super) fn charts(d: &Data, obs: Observations) -> Vec<(String, Chart)> {
    let (v, at) = (View { d, obs }, one(d));
    let designs = v.designs(at);
    let pool = |x: &Design| x.mode == "threads";
    let pools = designs.iter().filter(|x| pool(x));
    let xs: Vec<f64> = pools.map(|x| f64::from(x.threads)).collect();
    if xs.is_empty() {
        return brokers_chart(v).into_iter().collect();
    }
    let event_loop = designs.iter().any(|x| x.mode == "event-loop");
    // Each chart of the pools, the event loop flat across them, and the
    // article's two points where they were swept: 800 and 600 msg/s, 10%
    // and 30% switching, at 10 and 100 threads per pool.
    let chart = |title: &str, y: &str, metric: &str, was: [f64; 2]| {
        let pools = v.by_threads(at, &pool, metric);
        let mut c = Chart::new(title, "threads/pool", y);
        c = c.summaries(Meaning::Thread, "thread pools", pools);
        if event_loop {
            let s = v.summary(at, "event-loop", metric);
            let flat = xs.iter().filter_map(|&x| Some((x, s?))).collect::<Vec<_>>();
            c = c.summaries(Meaning::EventLoop, "event loop (1 thread)", flat);
        }
        c.log_x = xs.len() > 1;
        let was = [10.0, 100.0].into_iter().zip(was).filter(|p| xs.contains(&p.0));
        let was: Vec<_> = was.collect();
        if !was.is_empty() {
            c = c.series(Meaning::Article, "2006 article (1 CPU)", was);
        }
        c
    };
    let mut tp = chart(
        "Throughput vs threads per pool",
        "messages/s (median, band: min-max)",
        MSGS,
        [800.0, 600.0],
    );
    tp.log_y = true;
    let share = chart(
        "CPU share spent switching vs threads per pool",
        "% of broker CPU (median, band: min-max)",
        SHARE,
        [10.0, 30.0],
    );
    let mut out = vec![("throughput".into(), tp), ("switch-share".into(), share)];
    out.extend(brokers_chart(v));
    out
}

/// Redis's and NATS's throughput against their threads (io-threads,
/// GOMAXPROCS), with the lab broker's best design as a guide; none without
/// either server.
fn brokers_chart(v: View) -> Option<(String, Chart)> {
    let at = one(v.d);
    let designs = v.designs(at);
    let series = |keep: Keep| v.by_threads(at, keep, MSGS);
    let writes = series(&|x| x.mode == "redis" && x.reads_in_threads != Some(true));
    // Reading in the I/O threads starts from io-threads 1 (no I/O threads),
    // the point both lines share; a line only where some design reads.
    let some_read = designs.iter().any(|x| x.reads_in_threads == Some(true));
    let reads = series(&|x| {
        some_read
            && x.mode == "redis"
            && (x.reads_in_threads == Some(true) || x.threads == 1)
    });
    let nats = series(&|x| x.mode == "nats");
    if writes.is_empty() && nats.is_empty() {
        return None;
    }
    let mut chart = Chart::new(
        "Redis and NATS on the same load, by their threads",
        "threads (Redis io-threads, NATS GOMAXPROCS)",
        "messages/s (median, band: min-max)",
    );
    let xs: Vec<u32> =
        designs.iter().filter(|x| !x.ours()).map(|x| x.threads).collect();
    chart.log_x = xs.iter().any(|&x| x != xs[0]);
    for (kind, label, points) in [
        (Meaning::Redis.form(0), "Redis, I/O threads write only", writes),
        (Meaning::Redis.form(1), "Redis, I/O threads read too", reads),
        (Meaning::Nats.form(0), "NATS", nats),
    ] {
        if !points.is_empty() {
            chart = chart.summaries(kind, label, points);
        }
    }
    let median = |x: &&&Design| v.median(at, &x.condition, MSGS);
    let ours = designs.iter().filter(|x| x.ours());
    let best = ours.max_by(|a, b| median(a).total_cmp(&median(b)));
    if let Some(b) = best {
        let guide = format!("the lab broker's best: {}", label(b, at));
        chart = chart.guide(median(&b), &guide);
    }
    Some(("brokers".into(), chart))
}

#[cfg(test)]
mod tests {
    use super::super::servers::Setting;
    use super::super::{Point, Run, SwitchCost, design};
    use super::*;
    use crate::engine::Observation;
    use mq::Stats;
    use mq::load::LoadReport;

    /// One run: `out` messages in `elapsed` s, the broker spending `cpu` s
    /// and switching `switches` times; a switch costs 2 µs.
    fn run(out: u64, elapsed: f64, cpu: f64, switches: u64) -> Run {
        let mut load = LoadReport {
            sent: out,
            received: out,
            elapsed_s: elapsed,
            messages_per_s: out as f64 / elapsed,
            ..LoadReport::default()
        };
        load.latency.p50_us = 1500.0;
        load.latency.p99_us = 9000.0;
        let broker = serde_json::json!({"mode": "threads", "readers": 1, "writers": 1,
            "deliverers": 1, "queues": 1, "messages_in": out, "messages_out": out,
            "connections": 2, "closed_bad": 0, "refused": 0, "threads_joined": 4,
            "user_s": cpu / 2.0, "sys_s": cpu / 2.0, "voluntary_switches": switches,
            "involuntary_switches": 0});
        let broker: Option<Stats> = Some(serde_json::from_value(broker).unwrap());
        Run {
            load,
            broker,
            server: None,
            broker_wall_s: elapsed,
            switch_cost_us: 2.0,
        }
    }

    /// The designs' runs at one message per write, round by round, as the
    /// engine records them, with the results they make.
    fn measured(rows: Vec<(Point, Vec<Run>)>) -> (Data, Vec<Observation>) {
        let at = Offer { pipeline: 1, rate: 0 }.at();
        let mut log = Vec::new();
        for (p, runs) in &rows {
            log.extend(Observation::rounds(&at, &p.key(), runs));
        }
        let data = Data {
            rounds: 1,
            full: false,
            duration_s: 1.0,
            senders: 4,
            receivers: 4,
            queues: 2,
            size: 64,
            rate: 0,
            pipeline: vec![1],
            switch_cost: SwitchCost { us: 2.0, source: "test".into() },
            designs: rows.iter().map(|(p, _)| design(*p, &[], 0)).collect(),
            open_loop: None,
            missing: Vec::new(),
            series: Vec::new(),
        };
        (data, log)
    }

    /// T=10 and T=100 (the article's points) and the event loop.
    fn sweep() -> (Data, Vec<Observation>) {
        measured(vec![
            // 1000 msgs in 1 s, 0.5 s CPU, 50000 switches: 20% share.
            (Point::Pool(10), vec![run(1000, 1.0, 0.5, 50_000)]),
            (Point::Pool(100), vec![run(500, 1.0, 0.5, 100_000)]),
            (Point::EventLoop, vec![run(2000, 1.0, 0.25, 0)]),
        ])
    }

    #[test]
    fn rows_derive_share_and_cost_per_message_from_the_runs() {
        let (d, log) = sweep();
        let v = View { d: &d, obs: Observations(&log) };
        let at = one(&d);
        let m = |key: &str, metric: &str| v.median(at, key, metric);
        assert_eq!(m("threads-10", "messages_per_s"), 1000.0);
        assert_eq!(m("threads-10", "broker_cpu_pct"), 50.0);
        assert_eq!(m("threads-10", "switches_per_message"), 50.0);
        assert!((m("threads-10", "switch_share_pct") - 20.0).abs() < 1e-9);
        assert_eq!(m("threads-10", "cpu_us_per_message"), 500.0);
        assert_eq!(
            (m("threads-10", "p50_ms"), m("threads-10", "p99_ms")),
            (1.5, 9.0)
        );
        assert!((m("threads-100", "switch_share_pct") - 40.0).abs() < 1e-9);
    }

    #[test]
    fn the_tables_put_each_row_beside_the_articles_figures() {
        let (d, log) = sweep();
        let t = tables(&d, Observations(&log));
        assert_eq!(t.len(), 3);
        assert_eq!(
            t[0].rows[0],
            ["10", "1000 (1000-1000)", "~800", "20.0", "~10%", "50.000"]
        );
        assert_eq!(t[0].rows[1][2..5], ["~600", "40.0", "~30%"]);
        assert_eq!(t[0].rows[2][..3], ["event loop (1)", "2000 (2000-2000)", "-"]);
        assert!(
            t[0].notes[0].contains("a switch cost 2.00 us: test"),
            "{:?}",
            t[0].notes
        );
        assert_eq!(t[1].rows[0], ["10", "50", "500.00", "1.5", "9.0"]);
    }

    #[test]
    fn the_headline_pairs_rounds_for_ten_over_hundred() {
        // Round 2: both twice as fast; the paired ratio stays 2.
        let (d, log) = measured(vec![
            (Point::Pool(10), vec![run(1000, 1.0, 0.5, 0), run(2000, 0.5, 0.5, 0)]),
            (Point::Pool(100), vec![run(500, 1.0, 0.5, 0), run(1000, 0.5, 0.5, 0)]),
            (Point::EventLoop, vec![run(2000, 1.0, 0.25, 0); 2]),
        ]);
        let h = headline(&d, Observations(&log));
        assert_eq!(h["ten_over_hundred"]["value"], 2.0);
        assert_eq!(h["event_loop_messages_per_s"]["value"], 2000.0);
        assert_eq!(h["best_pool"]["value"], 10.0);
    }

    #[test]
    fn the_headline_pairs_each_server_setting_and_the_brokers_by_round() {
        let kind = mq::wire::Wire::Redis;
        let redis = |threads| Point::Server(Setting { kind, threads, reads: false });
        // Two rounds; the event loop (2000, 4000) is the lab's best.
        let (d, log) = measured(vec![
            (Point::Pool(10), vec![run(1000, 1.0, 0.5, 50_000); 2]),
            (Point::Pool(100), vec![run(500, 1.0, 0.5, 100_000); 2]),
            (Point::EventLoop, vec![run(2000, 1.0, 0.2, 0), run(4000, 1.0, 0.2, 0)]),
            (redis(1), vec![run(1000, 1.0, 0.5, 0), run(2000, 1.0, 0.5, 0)]),
            (redis(4), vec![run(250, 1.0, 0.5, 0), run(1000, 1.0, 0.5, 0)]),
        ]);
        let h = headline(&d, Observations(&log));
        // Per round: 1000/250 = 4 and 2000/1000 = 2; their median is 3.
        assert_eq!(h["redis_one_over_four"]["value"], 3.0);
        assert_eq!(h["redis_one_over_four"]["method"], "paired-ratio");
        // The lab's best over Redis's best: 2000/1000 and 4000/2000.
        assert_eq!(h["ours_over_redis"]["value"], 2.0);
        assert_eq!(
            h["redis_best_messages_per_s"]["rounds"],
            serde_json::json!([1000.0, 2000.0])
        );
        assert!(h.get("nats_one_over_two").is_none(), "no NATS rows, no figure");
        let t = brokers(&d, Observations(&log));
        assert_eq!(t.rows.len(), 5);
        assert_eq!(t.rows[3][0], "Redis, io-threads 1 (all in the main thread)");
    }

    #[test]
    fn the_charts_have_the_pools_the_event_loop_and_the_article() {
        let (d, log) = sweep();
        let charts = charts(&d, Observations(&log));
        let names: Vec<&str> = charts.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["throughput", "switch-share"]);
        let tp = &charts[0].1;
        let labels: Vec<&str> = tp.series.iter().map(|s| s.label.as_str()).collect();
        assert_eq!(
            labels,
            ["thread pools", "event loop (1 thread)", "2006 article (1 CPU)"]
        );
        assert_eq!(tp.series[0].points, [(10.0, 1000.0), (100.0, 500.0)]);
        assert_eq!(tp.series[1].points, [(10.0, 2000.0), (100.0, 2000.0)]);
        assert_eq!(tp.series[2].points, [(10.0, 800.0), (100.0, 600.0)]);
        let share = &charts[1].1;
        assert_eq!(share.series[2].points, [(10.0, 10.0), (100.0, 30.0)]);
    }
}
