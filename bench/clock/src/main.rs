//! Two measures of the runtime's event clock: how many of 2 million hand-offs
//! between two threads (each stamps after it sees the other's stamp) come out
//! with the later stamp smaller, and how far a stamp falls outside the
//! `clock_gettime` readings taken right before and after it.

// The runtime's own system calls, which clock.rs uses; the rest are the
// runtime's.
#[allow(dead_code)]
#[path = "../../../crates/runtime/src/sys.rs"]
mod sys;

// Its other entry points are the runtime's.
#[allow(dead_code)]
#[path = "../../../crates/runtime/src/clock.rs"]
mod clock;

use std::sync::atomic::{AtomicU64, Ordering};

const HAND_OFFS: u64 = 2_000_000;
/// The turn (high 16 bits) and the last stamp (low 48 bits).
static BALL: AtomicU64 = AtomicU64::new(0);
const STAMP_BITS: u64 = (1 << 48) - 1;

fn main() {
    clock::init();
    let players: Vec<_> = (0..2u64)
        .map(|me| {
            std::thread::spawn(move || {
                let mut clock = clock::Clock::new();
                let (mut out_of_order, mut worst) = (0u64, 0u64);
                for round in 0..HAND_OFFS / 2 {
                    let turn = (round * 2 + me) & 0xffff;
                    loop {
                        let ball = BALL.load(Ordering::Acquire);
                        if ball >> 48 == turn {
                            let stamp = clock.now() & STAMP_BITS;
                            let before = ball & STAMP_BITS;
                            if round + me > 0 && stamp < before {
                                out_of_order += 1;
                                worst = worst.max(before - stamp);
                            }
                            BALL.store(((turn + 1) & 0xffff) << 48 | stamp, Ordering::Release);
                            break;
                        }
                        std::hint::spin_loop();
                    }
                }
                (out_of_order, worst)
            })
        })
        .collect();
    let (mut out_of_order, mut worst) = (0, 0);
    for p in players {
        let (n, w) = p.join().unwrap();
        (out_of_order, worst) = (out_of_order + n, worst.max(w));
    }
    println!("hand-offs out of order: {out_of_order} of {HAND_OFFS}, by at most {worst} ns");

    let mut clock = clock::Clock::new();
    let (mut after, mut before) = (Vec::new(), Vec::new());
    for i in 0..20_000_000u64 {
        let r0 = sys::now_ns();
        let stamp = clock.now();
        let r1 = sys::now_ns();
        // Readings the thread was held up between say nothing of the clock.
        if r1 - r0 > 300 {
            continue;
        }
        after.push(stamp as i64 - r1 as i64);
        before.push(r0 as i64 - stamp as i64);
        if i % 1_000_000 == 0 {
            // Idle gaps: the segments start again after them.
            std::thread::sleep(std::time::Duration::from_millis(3));
        }
    }
    after.sort_unstable();
    before.sort_unstable();
    let q = |v: &[i64], f: f64| v[((v.len() - 1) as f64 * f) as usize];
    println!(
        "stamp after the later clock reading: median {} ns, 99.9% {} ns, most {} ns",
        q(&after, 0.5),
        q(&after, 0.999),
        after.last().unwrap()
    );
    println!(
        "stamp before the earlier clock reading: median {} ns, 99.9% {} ns, most {} ns",
        q(&before, 0.5),
        q(&before, 0.999),
        before.last().unwrap()
    );
}
