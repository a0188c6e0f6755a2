//! Who does what: seeded draws per buyer. The same seed and buyer always give the same
//! answer, and each draw (`stream`) is independent of the others.

/// Whether `user` pays, at `rate` (0 to 1), for the run seeded with `seed`. The same seed and
/// user always give the same answer; over many users, a `rate` share of them pay.
pub fn pays(seed: u64, user: u64, rate: f64) -> bool {
    picked(seed, user, 0, rate)
}

/// Whether `user` is picked at `rate` by the run's draw number `stream` (0: who pays; each
/// other stream is a draw of its own).
pub(super) fn picked(seed: u64, user: u64, stream: u64, rate: f64) -> bool {
    if rate <= 0.0 {
        return false;
    }
    // 53 random bits as a number in [0, 1).
    let x = splitmix64(seed ^ splitmix64(user) ^ stream) >> 11;
    (x as f64) / ((1u64 << 53) as f64) < rate
}

/// A seeded 64-bit draw for `user`, independent for each `stream`.
pub(super) fn mixed(seed: u64, user: u64, stream: u64) -> u64 {
    splitmix64(seed ^ splitmix64(user) ^ stream)
}

/// A good 64-bit mix (Steele, Lea and Flood's SplitMix64 finaliser).
fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}
