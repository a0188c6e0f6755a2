//! Lists and inserts shaped so that a batch's statements have few texts.
//!
//! The statements of a batch are prepared, and sqlx caches 100 of them per connection. Their
//! texts must not vary with every batch size: evicting a statement sends COM_STMT_CLOSE, which
//! the server does not answer, and since sqlx 0.9.0 leaves Nagle on (transact-rs/sqlx#4335) the
//! next packet then waits for the server's delayed ACK, ~40 ms, in the middle of the
//! transaction. So every list is padded to a power of two, and every multi-row insert is cut
//! into power-of-two chunks: a batch of up to 2^k orders uses at most k + 1 texts of each
//! statement (docs/BENCHMARKS.md has the measurements).

use sqlx::{MySql, QueryBuilder};

/// `values`, then its last value again up to the next power of two. Repeating a value changes
/// nothing in an `IN` list.
pub(super) fn padded<T: Copy>(values: &[T]) -> impl Iterator<Item = T> + '_ {
    let extra = values.len().next_power_of_two() - values.len();
    values
        .iter()
        .copied()
        .chain(values.last().copied().into_iter().cycle().take(extra))
}

/// Pushes `v1, v2, …` as bound values, padded (see [`padded`]).
pub(crate) fn push_padded<T>(q: &mut QueryBuilder<MySql>, values: &[T])
where
    T: Copy + for<'t> sqlx::Encode<'t, MySql> + sqlx::Type<MySql>,
{
    let mut sep = q.separated(", ");
    for v in padded(values) {
        sep.push_bind(v);
    }
}

/// `items` cut into chunks whose lengths are powers of two, largest first.
pub(super) fn pow2_chunks<T>(mut items: &[T]) -> impl Iterator<Item = &[T]> {
    std::iter::from_fn(move || {
        if items.is_empty() {
            return None;
        }
        let (chunk, rest) = items.split_at(1 << items.len().ilog2());
        items = rest;
        Some(chunk)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn lists_are_padded_to_a_power_of_two_with_their_last_value() {
        assert_eq!(padded(&[7]).collect::<Vec<_>>(), [7]);
        assert_eq!(padded(&[1, 2, 3]).collect::<Vec<_>>(), [1, 2, 3, 3]);
        assert_eq!(padded(&[1, 2, 3, 4]).collect::<Vec<_>>(), [1, 2, 3, 4]);
        assert_eq!(padded(&[1, 2, 3, 4, 5]).count(), 8);
        assert_eq!(padded::<u8>(&[]).count(), 0);
    }

    #[test]
    fn inserts_are_cut_into_power_of_two_chunks_largest_first() {
        let items: Vec<u32> = (0..500).collect();
        let chunks: Vec<&[u32]> = pow2_chunks(&items).collect();
        let lens: Vec<usize> = chunks.iter().map(|c| c.len()).collect();
        assert_eq!(lens, [256, 128, 64, 32, 16, 4]);
        assert_eq!(chunks.concat(), items, "every item once, in order");
        assert_eq!(pow2_chunks::<u32>(&[]).count(), 0);
        assert_eq!(pow2_chunks(&[1]).count(), 1);
    }

    #[test]
    fn a_batch_of_up_to_512_orders_uses_at_most_ten_texts_per_statement() {
        let mut list_lens = HashSet::new();
        let mut chunk_lens = HashSet::new();
        for n in 1..=512usize {
            let items: Vec<usize> = (0..n).collect();
            list_lens.insert(padded(&items).count());
            chunk_lens.extend(pow2_chunks(&items).map(|c| c.len()));
        }
        assert_eq!(list_lens.len(), 10);
        assert_eq!(chunk_lens.len(), 10);
    }
}
