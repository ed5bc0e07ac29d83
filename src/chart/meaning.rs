//! What a chart's series or row stands for, and so its colour and marker.
//!
//! A colour means one thing in every chart of the book: blue is always a
//! process, orange always a thread, and so on down [`Meaning::ALL`], which
//! is also the order of every legend. The forms of one meaning in one chart
//! (a C twin beside the Rust program, `vfork` beside `fork`, `std::thread`
//! beside `pthread_create`, a 1 MiB pipe beside the default one) share its
//! colour and marker and differ by [`Kind::form`]: a dashed line and a
//! hollow marker for the second form, a dotted one for the third. The
//! articles' own figures are marked points in the chart's ink, with no
//! line, and follow the book's theme as the text does.

/// What is measured, in the order every legend lists it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Meaning {
    /// A process: `fork`, a forked reader, a process per client.
    Process,
    /// A thread: `pthread_create`, a thread pool, two threads on a pipe.
    Thread,
    /// An async task on a runtime (tokio).
    Task,
    /// One thread that serves every side: an event loop, an iterative
    /// server, `pipespeed2` writing and reading its own pipe.
    EventLoop,
    /// A named pipe (FIFO) between threads.
    NamedPipe,
    /// A Unix socket pair between threads.
    SocketPair,
    /// A pipe filled by `vmsplice` (no copy on the writer's side).
    Vmsplice,
    /// A pipe emptied by `splice` (no copy on the reader's side either).
    Splice,
    /// Redis, a production server.
    Redis,
    /// NATS, a production server.
    Nats,
    /// A control: a program measured against itself.
    Control,
    /// A figure of the articles, as they printed it.
    Article,
}

impl Meaning {
    /// Every meaning, in legend order.
    pub const ALL: [Meaning; 12] = [
        Meaning::Process,
        Meaning::Thread,
        Meaning::Task,
        Meaning::EventLoop,
        Meaning::NamedPipe,
        Meaning::SocketPair,
        Meaning::Vmsplice,
        Meaning::Splice,
        Meaning::Redis,
        Meaning::Nats,
        Meaning::Control,
        Meaning::Article,
    ];

    /// Its colour, `#rrggbb`: Tableau's palette, its grey left to computed
    /// lines, and two more of the same weight (teal, goldenrod); each reads
    /// on the white card and on the dark themes' card (a contrast of at
    /// least 2 against either). The articles' figures are drawn in the
    /// ink, which the dark themes turn light.
    pub const fn colour(self) -> &'static str {
        match self {
            Meaning::Process => "#1f77b4",
            Meaning::Thread => "#ff7f0e",
            Meaning::Task => "#e377c2",
            Meaning::EventLoop => "#2ca02c",
            Meaning::NamedPipe => "#8c564b",
            Meaning::SocketPair => "#17becf",
            Meaning::Vmsplice => "#bcbd22",
            Meaning::Splice => "#008080",
            Meaning::Redis => "#d62728",
            Meaning::Nats => "#9467bd",
            Meaning::Control => "#b8860b",
            Meaning::Article => super::INK,
        }
    }

    /// What it stands for, as the book's key says it.
    pub const fn name(self) -> &'static str {
        match self {
            Meaning::Process => "a process",
            Meaning::Thread => "a thread",
            Meaning::Task => "an async task",
            Meaning::EventLoop => "one thread serving every side (an event loop)",
            Meaning::NamedPipe => "a named pipe",
            Meaning::SocketPair => "a socket pair",
            Meaning::Vmsplice => "vmsplice into a pipe",
            Meaning::Splice => "splice out of a pipe",
            Meaning::Redis => "Redis",
            Meaning::Nats => "NATS",
            Meaning::Control => "a control (a program against itself)",
            Meaning::Article => "the articles' figures",
        }
    }

    /// Its marker's shape: the four shapes in turn down the list, so that
    /// neighbours differ and a chart printed in grey still tells them
    /// apart; the articles' figures are crosses.
    pub(crate) fn shape(self) -> Shape {
        if self == Meaning::Article {
            return Shape::Cross;
        }
        let i = Meaning::ALL.iter().position(|m| *m == self).unwrap_or(0);
        [Shape::Circle, Shape::Square, Shape::Triangle, Shape::Diamond][i % 4]
    }

    /// The `form`th form of this meaning (0: the plain one).
    pub const fn form(self, form: u8) -> Kind {
        Kind { meaning: self, form }
    }
}

/// A marker's shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Shape {
    Circle,
    Square,
    Triangle,
    Diamond,
    Cross,
}

/// A series' meaning and which of its forms it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Kind {
    pub meaning: Meaning,
    /// 0 the plain form (solid line, filled marker), 1 dashed, 2 dotted.
    pub form: u8,
}

impl From<Meaning> for Kind {
    fn from(meaning: Meaning) -> Kind {
        meaning.form(0)
    }
}

impl Default for Kind {
    fn default() -> Kind {
        Meaning::Process.into()
    }
}

impl Kind {
    pub fn colour(self) -> &'static str {
        self.meaning.colour()
    }

    /// The line's dash (none for the plain form).
    pub(crate) fn dash(self) -> Option<&'static str> {
        match self.form {
            0 => None,
            1 => Some("8 4"),
            _ => Some("2 3"),
        }
    }

    /// A filled marker for the plain form, a hollow one for the others.
    pub(crate) fn filled(self) -> bool {
        self.form == 0
    }

    /// Its class on every element drawn for it (`lab-m-thread`), by which
    /// a page may find or restyle one meaning; the articles' figures also
    /// carry `lab-ink`, which the dark themes turn light.
    pub(crate) fn class(self) -> String {
        let name = format!("{:?}", self.meaning);
        let mut class = String::from("lab-m-");
        for (i, c) in name.chars().enumerate() {
            if c.is_ascii_uppercase() && i > 0 {
                class.push('-');
            }
            class.push(c.to_ascii_lowercase());
        }
        if self.meaning == Meaning::Article {
            class.push_str(" lab-ink");
        }
        class
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The relative luminance of `#rrggbb` (WCAG 2).
    fn luminance(hex: &str) -> f64 {
        let c = |i: usize| {
            let v = u8::from_str_radix(&hex[i..i + 2], 16).unwrap() as f64 / 255.0;
            if v <= 0.03928 { v / 12.92 } else { ((v + 0.055) / 1.055).powf(2.4) }
        };
        0.2126 * c(1) + 0.7152 * c(3) + 0.0722 * c(5)
    }

    fn contrast(a: &str, b: &str) -> f64 {
        let (a, b) = (luminance(a), luminance(b));
        (a.max(b) + 0.05) / (a.min(b) + 0.05)
    }

    #[test]
    fn every_meaning_has_a_colour_of_its_own_that_reads_on_both_cards() {
        for (i, a) in Meaning::ALL.iter().enumerate() {
            for b in &Meaning::ALL[i + 1..] {
                assert_ne!(a.colour(), b.colour(), "{a:?} and {b:?} share a colour");
            }
            assert_ne!(
                a.colour(),
                super::super::GUIDE,
                "grey is for computed lines"
            );
            if *a != Meaning::Article {
                // The light card, and the dark themes' card (book/lab.css).
                for card in ["#ffffff", "#1e2127"] {
                    let c = contrast(a.colour(), card);
                    assert!(c >= 2.0, "{a:?} on {card}: {c:.2}");
                }
            }
        }
    }

    #[test]
    fn the_list_is_in_order_and_neighbours_have_different_markers() {
        let mut sorted = Meaning::ALL;
        sorted.sort();
        assert_eq!(sorted, Meaning::ALL, "legend order is declaration order");
        for w in Meaning::ALL.windows(2) {
            assert_ne!(w[0].shape(), w[1].shape(), "{w:?}");
        }
        assert_eq!(Meaning::Article.shape(), Shape::Cross);
    }

    #[test]
    fn forms_differ_by_dash_and_fill_and_classes_name_the_meaning() {
        let plain = Kind::from(Meaning::SocketPair);
        assert_eq!((plain.dash(), plain.filled()), (None, true));
        assert_eq!(plain.class(), "lab-m-socket-pair");
        let c = Meaning::Thread.form(1);
        assert!(c.dash().is_some() && !c.filled());
        assert_ne!(Meaning::Thread.form(2).dash(), c.dash());
        assert_eq!(Kind::from(Meaning::Article).class(), "lab-m-article lab-ink");
    }
}
