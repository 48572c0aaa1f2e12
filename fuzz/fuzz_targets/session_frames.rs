//! Fuzzes the session protocol's frame decoder: any bytes, fed in any chunking, must decode
//! to frames or one error, never panic, never buffer more than one bounded frame; every frame
//! decoded must encode back to bytes that decode to the same frame.

#![no_main]

use libfuzzer_sys::fuzz_target;
use nervix_net::session::frame::{Frame, FrameDecoder, MAX_SESSION_FRAME_BYTES};

fuzz_target!(|data: &[u8]| {
    // The first byte picks a chunk size, so the decoder sees frames split anywhere.
    let Some((&chunk, bytes)) = data.split_first() else {
        return;
    };
    let chunk = usize::from(chunk).max(1);
    let mut decoder = FrameDecoder::new();
    for piece in bytes.chunks(chunk) {
        decoder.push(piece);
        assert!(decoder.buffered_bytes() <= MAX_SESSION_FRAME_BYTES + 4 + chunk);
        loop {
            match decoder.next_frame() {
                Ok(Some(frame)) => {
                    let encoded = frame.encode().expect("a decoded frame encodes");
                    let again = Frame::decode(&encoded).expect("its encoding decodes");
                    assert_eq!(again, frame);
                }
                Ok(None) => break,
                Err(_) => return,
            }
        }
    }
});
