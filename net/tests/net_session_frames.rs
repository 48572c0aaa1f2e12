//! Session protocol frames and producer credit (DESIGN §8; spec: Client Ingestors, "Outcomes"
//! and "Producers"): every frame type round-trips over generated field values, a decoder fed a
//! stream split at every chunk boundary yields the same frames, hostile inputs are refused
//! without panics or large allocations, and the credit ledger follows the spec's rule.
//!
//! Field values come from a small seeded generator rather than proptest, which this crate does
//! not depend on; each property runs over a fixed number of seeds, so failures reproduce.

use nervix_net::session::credit::{CreditAction, CreditError, ProducerCredit};
use nervix_net::session::frame::{
    submit_batch_header, ConsumerEndReason, ConsumerRefusal, DefectKind, ExpectedField,
    FailureCause, Frame, FrameDecoder, FrameError, OpenRefusal, Outcome, ProducerEndReason,
    UnknownCause, FRAME_LENGTH_BYTES, MAX_DETAIL_BYTES, MAX_FRAME_IPC_BYTES, MAX_NAME_BYTES,
    MAX_SESSION_FRAME_BYTES, SUBMIT_HEADER_BYTES,
};

/// How many generated cases each property runs.
const CASES: u64 = 512;

/// A xorshift64* generator: deterministic, seedable, good enough to vary field values.
struct Gen(u64);

impl Gen {
    fn new(seed: u64) -> Self {
        Self(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    fn u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// Edge values often, arbitrary values otherwise.
    fn int(&mut self) -> u64 {
        match self.u64() % 4 {
            0 => [0, 1, u64::MAX, u64::from(u32::MAX)][(self.u64() % 4) as usize],
            _ => self.u64() >> (self.u64() % 64),
        }
    }
    fn u32(&mut self) -> u32 {
        self.int() as u32
    }
    fn bool(&mut self) -> bool {
        self.u64().is_multiple_of(2)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.u64() % n as u64) as usize
    }
    fn string(&mut self, max: usize) -> String {
        const ALPHABET: &[&str] = &["a", "Z", "_", "0", " ", "é", "€", "𝄞", "\u{0}", "\n"];
        let mut s = String::new();
        let target = self.below(24);
        while s.chars().count() < target {
            let piece = ALPHABET[self.below(ALPHABET.len())];
            if s.len() + piece.len() > max {
                break;
            }
            s.push_str(piece);
        }
        s
    }
    fn bytes(&mut self) -> Vec<u8> {
        let n = self.below(300);
        (0..n).map(|_| self.u64() as u8).collect()
    }
    fn pick<T: Copy>(&mut self, all: &[T]) -> T {
        all[self.below(all.len())]
    }
    fn outcome(&mut self) -> Outcome {
        match self.below(10) {
            0 => Outcome::Completed,
            1 => Outcome::Rejected,
            2 => Outcome::Failed(FailureCause::AckTimeout),
            3 => Outcome::Invalid {
                defect: self.pick(DefectKind::ALL),
                detail: self.string(MAX_DETAIL_BYTES),
            },
            4 => Outcome::CreditExceeded,
            5 => Outcome::ProducerEnded,
            6 => Outcome::Draining,
            7 => {
                Outcome::Unknown(self.pick(&[UnknownCause::OwnerLost, UnknownCause::ProducerEnded]))
            }
            8 => Outcome::Suspended,
            _ => Outcome::Busy,
        }
    }
    fn fields(&mut self) -> Vec<ExpectedField> {
        (0..self.below(6))
            .map(|_| ExpectedField {
                name: self.string(MAX_NAME_BYTES),
                type_text: self
                    .pick(&["STRING", "I64", "LIST<F64>", "DATETIME", ""])
                    .into(),
                optional: self.bool(),
                sensitive: self.bool(),
            })
            .collect()
    }
    /// A frame of type `kind` (0..FRAME_KINDS, in type-code order) with generated fields.
    fn frame(&mut self, kind: usize) -> Frame {
        match kind {
            0 => Frame::OpenProducer {
                request_id: self.int(),
                domain: self.string(MAX_NAME_BYTES),
                ingestor: self.string(MAX_NAME_BYTES),
                expected_fields: self.fields(),
                credit_batches: self.u32(),
                credit_bytes: self.int(),
            },
            1 => Frame::ProducerOpened {
                request_id: self.int(),
                producer_id: self.int(),
                start_generation: self.int(),
                contract_id: self.int(),
                granted_batches: self.u32(),
                granted_bytes: self.int(),
                admission_open: self.bool(),
                retry_backoff_ms: self.int(),
                retry_max_ms: self.int(),
            },
            2 => Frame::OpenRefused {
                request_id: self.int(),
                reason: self.pick(OpenRefusal::ALL),
            },
            3 => Frame::SubmitBatch {
                producer_id: self.int(),
                batch_seq: self.int(),
                ipc: self.bytes(),
            },
            4 => Frame::BatchOutcome {
                producer_id: self.int(),
                batch_seq: self.int(),
                outcome: self.outcome(),
            },
            5 => Frame::ProducerEnded {
                producer_id: self.int(),
                reason: self.pick(ProducerEndReason::ALL),
            },
            6 => Frame::AdmissionChanged {
                producer_id: self.int(),
                open: self.bool(),
            },
            7 => Frame::OpenConsumer {
                request_id: self.int(),
                domain: self.string(MAX_NAME_BYTES),
                emitter: self.string(MAX_NAME_BYTES),
                credit_batches: self.u32(),
            },
            8 => Frame::ConsumerOpened {
                request_id: self.int(),
                consumer_id: self.int(),
                fields: self.fields(),
                granted_batches: self.u32(),
            },
            9 => Frame::ConsumerRefused {
                request_id: self.int(),
                reason: self.pick(ConsumerRefusal::ALL),
            },
            10 => Frame::Delivery {
                consumer_id: self.int(),
                delivery_seq: self.int(),
                ipc: self.bytes(),
            },
            11 => Frame::DeliveryAck {
                consumer_id: self.int(),
                delivery_seq: self.int(),
                accepted: self.bool(),
            },
            12 => Frame::ConsumerEnded {
                consumer_id: self.int(),
                reason: self.pick(ConsumerEndReason::ALL),
            },
            13 => Frame::CloseProducer {
                producer_id: self.int(),
            },
            _ => Frame::CloseConsumer {
                consumer_id: self.int(),
            },
        }
    }
}

const FRAME_KINDS: usize = 15;

fn encode(frame: &Frame) -> Vec<u8> {
    frame.encode().expect("a generated frame is within bounds")
}

#[test]
fn every_frame_type_round_trips_over_generated_values() {
    for seed in 0..CASES {
        let mut g = Gen::new(seed);
        for kind in 0..FRAME_KINDS {
            let frame = g.frame(kind);
            let bytes = encode(&frame);
            let declared = u32::from_be_bytes(bytes[..4].try_into().unwrap()) as usize;
            assert_eq!(declared + FRAME_LENGTH_BYTES, bytes.len(), "{frame:?}");
            assert_eq!(Frame::decode(&bytes), Ok(frame.clone()), "seed {seed}");
            assert_eq!(usize::from(frame.frame_type()), kind + 1, "{frame:?}");
        }
    }
}

#[test]
fn type_codes_are_stable() {
    let mut g = Gen::new(3);
    let codes: Vec<u8> = (0..FRAME_KINDS).map(|k| g.frame(k).frame_type()).collect();
    assert_eq!(codes, (1..=15).collect::<Vec<u8>>());
    // Appending variants must never renumber the older ones.
    assert_eq!(ProducerEndReason::ALL.len(), 7);
    assert_eq!(ProducerEndReason::ALL[6], ProducerEndReason::Closed);
    let ended = encode(&Frame::ProducerEnded {
        producer_id: 0,
        reason: ProducerEndReason::Relocated,
    });
    assert_eq!(ended.last(), Some(&5));
}

#[test]
fn submit_header_is_the_prefix_encode_writes() {
    let mut g = Gen::new(11);
    for _ in 0..CASES {
        let (producer_id, batch_seq, ipc) = (g.int(), g.int(), g.bytes());
        let whole = encode(&Frame::SubmitBatch {
            producer_id,
            batch_seq,
            ipc: ipc.clone(),
        });
        let header = submit_batch_header(producer_id, batch_seq, ipc.len()).unwrap();
        assert_eq!(&whole[..SUBMIT_HEADER_BYTES], &header[..]);
        assert_eq!(&whole[SUBMIT_HEADER_BYTES..], &ipc[..]);
    }
    assert!(submit_batch_header(1, 1, MAX_FRAME_IPC_BYTES).is_ok());
    for len in [MAX_FRAME_IPC_BYTES + 1, u32::MAX as usize + 1, usize::MAX] {
        assert!(matches!(
            submit_batch_header(1, 1, len),
            Err(FrameError::TooLarge { .. })
        ));
    }
}

#[test]
fn every_outcome_and_reason_round_trips() {
    let mut outcomes = vec![
        Outcome::Completed,
        Outcome::Rejected,
        Outcome::Failed(FailureCause::AckTimeout),
        Outcome::CreditExceeded,
        Outcome::ProducerEnded,
        Outcome::Draining,
        Outcome::Unknown(UnknownCause::OwnerLost),
        Outcome::Unknown(UnknownCause::ProducerEnded),
        Outcome::Suspended,
        Outcome::Busy,
    ];
    outcomes.extend(DefectKind::ALL.iter().map(|&defect| Outcome::Invalid {
        defect,
        detail: "détail".into(),
    }));
    for outcome in outcomes {
        let frame = Frame::BatchOutcome {
            producer_id: 7,
            batch_seq: 9,
            outcome: outcome.clone(),
        };
        assert_eq!(Frame::decode(&encode(&frame)), Ok(frame));
        assert_eq!(
            outcome.is_temporary(),
            matches!(outcome, Outcome::Suspended | Outcome::Busy)
        );
        assert_eq!(outcome.is_terminal(), !outcome.is_temporary());
    }
    for &reason in OpenRefusal::ALL {
        let frame = Frame::OpenRefused {
            request_id: 1,
            reason,
        };
        assert_eq!(Frame::decode(&encode(&frame)), Ok(frame));
    }
    for &reason in ProducerEndReason::ALL {
        let frame = Frame::ProducerEnded {
            producer_id: 1,
            reason,
        };
        assert_eq!(Frame::decode(&encode(&frame)), Ok(frame));
    }
    for &reason in ConsumerRefusal::ALL {
        let frame = Frame::ConsumerRefused {
            request_id: 1,
            reason,
        };
        assert_eq!(Frame::decode(&encode(&frame)), Ok(frame));
    }
    for &reason in ConsumerEndReason::ALL {
        let frame = Frame::ConsumerEnded {
            consumer_id: 1,
            reason,
        };
        assert_eq!(Frame::decode(&encode(&frame)), Ok(frame));
    }
}

#[test]
fn decoder_yields_the_same_frames_at_every_chunk_boundary() {
    let mut g = Gen::new(42);
    let frames: Vec<Frame> = (0..40).map(|i| g.frame(i % FRAME_KINDS)).collect();
    let stream: Vec<u8> = frames.iter().flat_map(encode).collect();
    let drain = |d: &mut FrameDecoder, out: &mut Vec<Frame>| {
        while let Some(f) = d.next_frame().expect("a valid stream") {
            out.push(f);
        }
    };
    // Two chunks, split at every boundary.
    for split in 0..=stream.len() {
        let mut d = FrameDecoder::new();
        let mut out = Vec::new();
        d.push(&stream[..split]);
        drain(&mut d, &mut out);
        d.push(&stream[split..]);
        drain(&mut d, &mut out);
        assert_eq!(out, frames, "split at {split}");
        assert!(d.is_idle());
    }
    // Byte by byte, and in chunks of every small size.
    for size in 1..=17 {
        let mut d = FrameDecoder::new();
        let mut out = Vec::new();
        for chunk in stream.chunks(size) {
            d.push(chunk);
            drain(&mut d, &mut out);
        }
        assert_eq!(out, frames, "chunks of {size}");
        assert!(d.is_idle());
    }
}

#[test]
fn a_huge_declared_length_is_refused_from_the_header_alone() {
    for len in [MAX_SESSION_FRAME_BYTES as u32 + 1, u32::MAX] {
        let mut d = FrameDecoder::new();
        d.push(&len.to_be_bytes());
        let err = d.next_frame().unwrap_err();
        assert!(matches!(err, FrameError::TooLarge { .. }), "{err:?}");
        // Failed for good, and the buffer was released.
        d.push(&[TYPE_SUBMIT; 64]);
        assert_eq!(d.next_frame(), Err(err));
        assert_eq!(d.buffered_bytes(), 0);
    }
    // The largest allowed length only waits for more bytes.
    let mut d = FrameDecoder::new();
    d.push(&(MAX_SESSION_FRAME_BYTES as u32).to_be_bytes());
    d.push(&[TYPE_SUBMIT]);
    assert_eq!(d.next_frame(), Ok(None));
    assert_eq!(d.buffered_bytes(), 5);
}

const TYPE_SUBMIT: u8 = 4;

/// A hostile input's name, its bytes, and the check its error must pass.
type HostileCase = (&'static str, Vec<u8>, fn(&FrameError) -> bool);

/// A whole frame around `frame_type` and `body`.
fn raw(frame_type: u8, body: &[u8]) -> Vec<u8> {
    let mut out = ((body.len() + 1) as u32).to_be_bytes().to_vec();
    out.push(frame_type);
    out.extend_from_slice(body);
    out
}

#[test]
fn hostile_frames_are_refused_with_the_right_error() {
    let submit_prefix = {
        let mut b = 1u64.to_be_bytes().to_vec();
        b.extend_from_slice(&2u64.to_be_bytes());
        b
    };
    let mut huge_ipc = submit_prefix.clone();
    huge_ipc.extend_from_slice(&u32::MAX.to_be_bytes());
    let mut short_ipc = submit_prefix.clone();
    short_ipc.extend_from_slice(&10u32.to_be_bytes());
    short_ipc.extend_from_slice(&[0; 3]);
    let mut bad_utf8 = 1u64.to_be_bytes().to_vec();
    bad_utf8.extend_from_slice(&2u32.to_be_bytes());
    bad_utf8.extend_from_slice(&[0xC3, 0x28]);
    let mut long_name = 1u64.to_be_bytes().to_vec();
    long_name.extend_from_slice(&(MAX_NAME_BYTES as u32 + 1).to_be_bytes());
    let mut many_fields = 1u64.to_be_bytes().to_vec();
    many_fields.extend_from_slice(&[0; 8]); // empty domain and ingestor
    many_fields.extend_from_slice(&(1u32 << 20).to_be_bytes());
    let mut bad_flags = 1u64.to_be_bytes().to_vec();
    bad_flags.extend_from_slice(&[0; 8]);
    bad_flags.extend_from_slice(&1u32.to_be_bytes());
    bad_flags.extend_from_slice(&[0; 8]);
    bad_flags.push(0b100);
    let mut bad_bool = 1u64.to_be_bytes().to_vec();
    bad_bool.push(2);
    let mut bad_outcome = submit_prefix.clone();
    bad_outcome.push(200);
    let mut bad_defect = submit_prefix.clone();
    bad_defect.extend_from_slice(&[3, 8]);
    let mut trailing = 1u64.to_be_bytes().to_vec();
    trailing.extend_from_slice(&[1, 0]);
    let mut ack_bad_bool = submit_prefix.clone();
    ack_bad_bool.push(2);
    let mut many_consumer_fields = submit_prefix.clone();
    many_consumer_fields.extend_from_slice(&(1u32 << 20).to_be_bytes());
    let mut bad_emitter = 1u64.to_be_bytes().to_vec();
    bad_emitter.extend_from_slice(&0u32.to_be_bytes());
    bad_emitter.extend_from_slice(&1u32.to_be_bytes());
    bad_emitter.push(0xFF);

    let cases: Vec<HostileCase> = vec![
        ("empty frame", 0u32.to_be_bytes().to_vec(), |e| {
            *e == FrameError::Empty
        }),
        ("unknown type 0", raw(0, &[]), |e| {
            *e == FrameError::UnknownType(0)
        }),
        ("unknown type 255", raw(255, &[1, 2, 3]), |e| {
            *e == FrameError::UnknownType(255)
        }),
        ("truncated u64", raw(7, &[0; 5]), |e| {
            matches!(e, FrameError::Truncated { .. })
        }),
        ("huge ipc length", raw(4, &huge_ipc), |e| {
            matches!(e, FrameError::FieldTooLong { .. })
        }),
        ("short ipc", raw(4, &short_ipc), |e| {
            matches!(e, FrameError::Truncated { field: "ipc" })
        }),
        ("bad utf-8", raw(1, &bad_utf8), |e| {
            matches!(e, FrameError::InvalidUtf8 { field: "domain" })
        }),
        ("long name", raw(1, &long_name), |e| {
            matches!(
                e,
                FrameError::FieldTooLong {
                    field: "domain",
                    ..
                }
            )
        }),
        ("many fields, few bytes", raw(1, &many_fields), |e| {
            matches!(e, FrameError::Truncated { .. })
        }),
        ("bad flags", raw(1, &bad_flags), |e| {
            matches!(
                e,
                FrameError::UnknownCode {
                    field: "field flags",
                    ..
                }
            )
        }),
        ("bad bool", raw(7, &bad_bool), |e| {
            matches!(
                e,
                FrameError::UnknownCode {
                    field: "open",
                    code: 2
                }
            )
        }),
        ("bad outcome", raw(5, &bad_outcome), |e| {
            matches!(
                e,
                FrameError::UnknownCode {
                    field: "outcome",
                    code: 200
                }
            )
        }),
        ("bad defect", raw(5, &bad_defect), |e| {
            matches!(
                e,
                FrameError::UnknownCode {
                    field: "defect",
                    code: 8
                }
            )
        }),
        ("bad refusal", raw(3, &[0, 0, 0, 0, 0, 0, 0, 0, 99]), |e| {
            matches!(e, FrameError::UnknownCode { .. })
        }),
        (
            "bad consumer refusal",
            raw(10, &[0, 0, 0, 0, 0, 0, 0, 0, 6]),
            |e| {
                matches!(
                    e,
                    FrameError::UnknownCode {
                        field: "reason",
                        code: 6
                    }
                )
            },
        ),
        (
            "bad consumer end",
            raw(13, &[0, 0, 0, 0, 0, 0, 0, 0, 4]),
            |e| {
                matches!(
                    e,
                    FrameError::UnknownCode {
                        field: "reason",
                        code: 4
                    }
                )
            },
        ),
        ("bad ack bool", raw(12, &ack_bad_bool), |e| {
            matches!(
                e,
                FrameError::UnknownCode {
                    field: "accepted",
                    code: 2
                }
            )
        }),
        ("huge delivery", raw(11, &huge_ipc), |e| {
            matches!(e, FrameError::FieldTooLong { field: "ipc", .. })
        }),
        ("short delivery", raw(11, &short_ipc), |e| {
            matches!(e, FrameError::Truncated { field: "ipc" })
        }),
        (
            "many consumer fields, few bytes",
            raw(9, &many_consumer_fields),
            |e| matches!(e, FrameError::Truncated { .. }),
        ),
        ("bad emitter utf-8", raw(8, &bad_emitter), |e| {
            matches!(e, FrameError::InvalidUtf8 { field: "emitter" })
        }),
        ("trailing close", raw(14, &[0; 9]), |e| {
            matches!(
                e,
                FrameError::TrailingBytes {
                    frame_type: 14,
                    extra_bytes: 1
                }
            )
        }),
        ("truncated close consumer", raw(15, &[0; 7]), |e| {
            matches!(
                e,
                FrameError::Truncated {
                    field: "consumer id"
                }
            )
        }),
        ("unknown type 16", raw(16, &[0; 8]), |e| {
            *e == FrameError::UnknownType(16)
        }),
        ("trailing", raw(7, &trailing), |e| {
            matches!(
                e,
                FrameError::TrailingBytes {
                    frame_type: 7,
                    extra_bytes: 1
                }
            )
        }),
    ];
    for (name, bytes, expected) in cases {
        let err = Frame::decode(&bytes).expect_err(name);
        assert!(expected(&err), "{name}: {err:?}");
        let mut d = FrameDecoder::new();
        d.push(&bytes);
        assert_eq!(d.next_frame(), Err(err.clone()), "{name}");
        assert_eq!(d.next_frame(), Err(err), "{name}: stays failed");
    }
    // A whole frame followed by more bytes is not one frame.
    let mut two = encode(&Frame::AdmissionChanged {
        producer_id: 1,
        open: true,
    });
    two.push(0);
    assert!(matches!(
        Frame::decode(&two),
        Err(FrameError::TrailingBytes { .. })
    ));
    assert!(matches!(
        Frame::decode(&two[..5]),
        Err(FrameError::Truncated { .. })
    ));
}

#[test]
fn every_truncation_and_corruption_of_valid_frames_never_panics() {
    let mut g = Gen::new(7);
    for kind in 0..FRAME_KINDS {
        for _ in 0..8 {
            let bytes = encode(&g.frame(kind));
            for cut in 0..bytes.len() {
                assert!(Frame::decode(&bytes[..cut]).is_err());
            }
            for i in 0..bytes.len() {
                for flip in [0x01u8, 0x80, 0xFF] {
                    let mut bad = bytes.clone();
                    bad[i] ^= flip;
                    let _ = Frame::decode(&bad);
                }
            }
        }
    }
    for seed in 0..CASES * 8 {
        let mut g = Gen::new(seed);
        let mut noise: Vec<u8> = (0..g.below(64)).map(|_| g.u64() as u8).collect();
        if noise.len() >= 4 {
            // Keep the declared length small so the frame is fully present now and then.
            let body_len = (noise.len() - 4) as u32;
            noise[..4].copy_from_slice(&body_len.to_be_bytes());
        }
        let mut d = FrameDecoder::new();
        d.push(&noise);
        while let Ok(Some(_)) = d.next_frame() {}
    }
}

#[test]
fn encoding_refuses_what_decoding_would_refuse() {
    let long = "x".repeat(MAX_NAME_BYTES + 1);
    let frame = Frame::OpenProducer {
        request_id: 1,
        domain: long,
        ingestor: "i".into(),
        expected_fields: vec![],
        credit_batches: 1,
        credit_bytes: 1,
    };
    assert!(matches!(
        frame.encode(),
        Err(FrameError::FieldTooLong {
            field: "domain",
            ..
        })
    ));
    let frame = Frame::SubmitBatch {
        producer_id: 1,
        batch_seq: 1,
        ipc: vec![0; MAX_SESSION_FRAME_BYTES],
    };
    assert!(matches!(frame.encode(), Err(FrameError::TooLarge { .. })));
    let exact = Frame::SubmitBatch {
        producer_id: 1,
        batch_seq: 1,
        ipc: vec![0; MAX_SESSION_FRAME_BYTES - 1 - 8 - 8 - 4],
    };
    let bytes = encode(&exact);
    assert_eq!(bytes.len(), FRAME_LENGTH_BYTES + MAX_SESSION_FRAME_BYTES);
    assert_eq!(Frame::decode(&bytes), Ok(exact));
}

#[test]
fn invalid_outcome_carries_the_defect_word_and_a_bounded_detail() {
    let defect = nervix_net::batch::BatchDefect::Malformed("€".repeat(MAX_DETAIL_BYTES));
    let Outcome::Invalid {
        defect: kind,
        detail,
    } = Outcome::invalid(&defect)
    else {
        panic!("not invalid");
    };
    assert_eq!(kind, DefectKind::Malformed);
    assert!(detail.len() <= MAX_DETAIL_BYTES && detail.starts_with("malformed: €"));
}

// ---- credit ledger ----

/// One step of a ledger scenario and what it must answer.
enum Step {
    Submit(u64, u64, Result<(), fn(&CreditError) -> bool>),
    Outcome(u64, Result<u64, fn(&CreditError) -> bool>),
    End,
}

/// A ledger scenario: name, granted batches and bytes, steps, final outstanding batches and
/// bytes, and whether the producer ended.
type LedgerCase = (&'static str, u32, u64, Vec<Step>, (u32, u64), bool);

fn exceeded(e: &CreditError) -> bool {
    matches!(e, CreditError::Exceeded { .. })
}
fn duplicate(e: &CreditError) -> bool {
    matches!(e, CreditError::DuplicateSeq { .. })
}
fn ended(e: &CreditError) -> bool {
    matches!(e, CreditError::Ended { .. })
}
fn unknown(e: &CreditError) -> bool {
    matches!(e, CreditError::UnknownSeq { .. })
}

#[test]
fn credit_ledger_scenarios() {
    use Step::*;
    // (name, granted batches, granted bytes, steps, final outstanding (batches, bytes), ended)
    let table: Vec<LedgerCase> = vec![
        (
            "fill to the limit",
            3,
            300,
            vec![
                Submit(1, 100, Ok(())),
                Submit(2, 100, Ok(())),
                Submit(3, 100, Ok(())),
            ],
            (3, 300),
            false,
        ),
        (
            "exceed by one batch",
            2,
            1000,
            vec![
                Submit(1, 1, Ok(())),
                Submit(2, 1, Ok(())),
                Submit(3, 1, Err(exceeded)),
            ],
            (2, 2),
            true,
        ),
        (
            "exceed by bytes",
            5,
            100,
            vec![Submit(1, 60, Ok(())), Submit(2, 41, Err(exceeded))],
            (1, 60),
            true,
        ),
        (
            "one batch larger than all the bytes",
            5,
            100,
            vec![Submit(1, 101, Err(exceeded))],
            (0, 0),
            true,
        ),
        (
            "bytes near u64::MAX do not overflow",
            5,
            u64::MAX,
            vec![Submit(1, u64::MAX, Ok(())), Submit(2, 1, Err(exceeded))],
            (1, u64::MAX),
            true,
        ),
        (
            "zero credit refuses the first batch",
            0,
            0,
            vec![Submit(1, 0, Err(exceeded))],
            (0, 0),
            true,
        ),
        (
            "outcome returns credit",
            1,
            100,
            vec![
                Submit(1, 100, Ok(())),
                Outcome(1, Ok(100)),
                Submit(2, 100, Ok(())),
            ],
            (1, 100),
            false,
        ),
        (
            "seq may be resent after its outcome",
            1,
            10,
            vec![
                Submit(1, 10, Ok(())),
                Outcome(1, Ok(10)),
                Submit(1, 10, Ok(())),
            ],
            (1, 10),
            false,
        ),
        (
            "duplicate seq while outstanding",
            4,
            100,
            vec![Submit(1, 10, Ok(())), Submit(1, 10, Err(duplicate))],
            (1, 10),
            true,
        ),
        (
            "outcome for an unknown seq",
            4,
            100,
            vec![Submit(1, 10, Ok(())), Outcome(2, Err(unknown))],
            (1, 10),
            false,
        ),
        (
            "second outcome for the same seq",
            4,
            100,
            vec![
                Submit(1, 10, Ok(())),
                Outcome(1, Ok(10)),
                Outcome(1, Err(unknown)),
            ],
            (0, 0),
            false,
        ),
        (
            "after exceeding, nothing is admitted but outcomes still return credit",
            1,
            100,
            vec![
                Submit(1, 50, Ok(())),
                Submit(2, 10, Err(exceeded)),
                Outcome(1, Ok(50)),
                Submit(3, 10, Err(ended)),
            ],
            (0, 0),
            true,
        ),
        (
            "ended for another reason refuses as producer ended",
            4,
            100,
            vec![
                Submit(1, 10, Ok(())),
                End,
                Submit(2, 10, Err(ended)),
                Outcome(1, Ok(10)),
            ],
            (0, 0),
            true,
        ),
    ];
    for (name, batches, bytes, steps, (out_batches, out_bytes), is_ended) in table {
        let mut c = ProducerCredit::new(batches, bytes);
        for (i, step) in steps.into_iter().enumerate() {
            match step {
                Submit(seq, n, want) => {
                    let got = c.on_submit(seq, n);
                    match (want, &got) {
                        (Ok(()), Ok(())) => assert!(c.is_outstanding(seq)),
                        (Err(check), Err(e)) => assert!(check(e), "{name} step {i}: {e:?}"),
                        _ => panic!("{name} step {i}: got {got:?}"),
                    }
                }
                Outcome(seq, want) => {
                    let got = c.on_outcome(seq);
                    match (want, &got) {
                        (Ok(n), Ok(m)) => assert_eq!(n, *m, "{name} step {i}"),
                        (Err(check), Err(e)) => assert!(check(e), "{name} step {i}: {e:?}"),
                        _ => panic!("{name} step {i}: got {got:?}"),
                    }
                }
                End => c.end(),
            }
        }
        assert_eq!(
            (c.outstanding_batches(), c.outstanding_bytes()),
            (out_batches, out_bytes),
            "{name}"
        );
        assert_eq!(c.is_ended(), is_ended, "{name}");
        assert_eq!(
            (c.granted_batches(), c.granted_bytes()),
            (batches, bytes),
            "{name}"
        );
    }
}

#[test]
fn credit_errors_say_what_to_do() {
    use nervix_net::session::frame::Outcome as O;
    let violation = Some(ProducerEndReason::ProtocolViolation);
    let mut c = ProducerCredit::new(1, 10);
    let exceeded = c.on_submit(1, 11).unwrap_err();
    assert_eq!(
        exceeded.action(),
        CreditAction {
            answer: Some(O::CreditExceeded),
            end_producer: violation
        }
    );
    assert_eq!(
        c.on_submit(2, 1).unwrap_err().action(),
        CreditAction {
            answer: Some(O::ProducerEnded),
            end_producer: None
        }
    );
    let mut c = ProducerCredit::new(2, 10);
    c.on_submit(1, 1).unwrap();
    assert_eq!(
        c.on_submit(1, 1).unwrap_err().action(),
        CreditAction {
            answer: None,
            end_producer: violation
        }
    );
    assert_eq!(
        c.on_outcome(9).unwrap_err().action(),
        CreditAction {
            answer: None,
            end_producer: None
        }
    );
}
