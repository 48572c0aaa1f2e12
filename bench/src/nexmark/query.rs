//! The Nexmark ports in `bench/nexmark/`: which file, which streams it reads, which CLIENT
//! CONSUMER emitter carries its answer, and the script that deploys it into a domain.
//!
//! The NSPL files are compiled in (`include_str!`), so the binary runs exactly the files the
//! tests validate and the README describes.

use nexmark::event::{Auction, Bid, Person};

use super::reference::{self, Row};

/// `bench/nexmark/schema.nspl`: the three streams' schemas, relays and ingestors.
pub const SCHEMA_NSPL: &str = include_str!("../../nexmark/schema.nspl");

/// The ingestors of the three streams, as `schema.nspl` names them.
pub const PERSON_INGESTOR: &str = "person_in";
pub const AUCTION_INGESTOR: &str = "auction_in";
pub const BID_INGESTOR: &str = "bid_in";

/// The streams a query reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Inputs {
    Bids,
    PersonsAndAuctions,
}

/// Which Nexmark query a port answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Nexmark {
    Q0,
    Q1,
    Q2,
    Q5,
    Q7,
    Q8,
}

/// One ported query.
#[derive(Debug, Clone, Copy)]
pub struct Query {
    pub nexmark: Nexmark,
    /// `q0` … `q8`.
    pub name: &'static str,
    /// The port's NSPL (after `schema.nspl`).
    pub nspl: &'static str,
    /// Its CLIENT CONSUMER emitter.
    pub emitter: &'static str,
    pub inputs: Inputs,
    /// Whether the engine runs it today (every port does).
    pub runs: bool,
}

/// The six ports, in Nexmark order.
pub const QUERIES: [Query; 6] = [
    Query {
        nexmark: Nexmark::Q0,
        name: "q0",
        nspl: include_str!("../../nexmark/q0.nspl"),
        emitter: "q0_out",
        inputs: Inputs::Bids,
        runs: true,
    },
    Query {
        nexmark: Nexmark::Q1,
        name: "q1",
        nspl: include_str!("../../nexmark/q1.nspl"),
        emitter: "q1_out",
        inputs: Inputs::Bids,
        runs: true,
    },
    Query {
        nexmark: Nexmark::Q2,
        name: "q2",
        nspl: include_str!("../../nexmark/q2.nspl"),
        emitter: "q2_out",
        inputs: Inputs::Bids,
        runs: true,
    },
    Query {
        nexmark: Nexmark::Q5,
        name: "q5",
        nspl: include_str!("../../nexmark/q5.nspl"),
        emitter: "q5_out",
        inputs: Inputs::Bids,
        runs: true,
    },
    Query {
        nexmark: Nexmark::Q7,
        name: "q7",
        nspl: include_str!("../../nexmark/q7.nspl"),
        emitter: "q7_out",
        inputs: Inputs::Bids,
        runs: true,
    },
    Query {
        nexmark: Nexmark::Q8,
        name: "q8",
        nspl: include_str!("../../nexmark/q8.nspl"),
        emitter: "q8_out",
        inputs: Inputs::PersonsAndAuctions,
        runs: true,
    },
];

impl Query {
    /// The query named `name` (`q0`, …).
    pub fn named(name: &str) -> Option<Query> {
        QUERIES.into_iter().find(|q| q.name == name)
    }

    /// Creates domain `domain`, uses it, and creates the streams and this port in it; the
    /// caller appends `START;` to run it.
    pub fn script(&self, domain: &str) -> String {
        format!(
            "CREATE DOMAIN {domain};\nUSE {domain};\n{SCHEMA_NSPL}\n{}\n",
            self.nspl
        )
    }

    /// The reference answer over these events.
    pub fn reference(&self, persons: &[Person], auctions: &[Auction], bids: &[Bid]) -> Vec<Row> {
        match self.nexmark {
            Nexmark::Q0 => reference::q0(bids),
            Nexmark::Q1 => reference::q1(bids),
            Nexmark::Q2 => reference::q2(bids),
            Nexmark::Q5 => reference::q5(bids),
            Nexmark::Q7 => reference::q7(bids),
            Nexmark::Q8 => reference::q8(persons, auctions),
        }
    }

    /// How many rows the answer over `bids` has, for the stateless bid queries (q0–q2), whose
    /// answer over a batch does not depend on the batches before it.
    pub fn stateless_rows(&self, bids: &[Bid]) -> Option<usize> {
        match self.nexmark {
            Nexmark::Q0 | Nexmark::Q1 => Some(bids.len()),
            Nexmark::Q2 => Some(bids.iter().filter(|b| reference::q2_keeps(b)).count()),
            Nexmark::Q5 | Nexmark::Q7 | Nexmark::Q8 => None,
        }
    }
}
