//! Work spread over every core, only when there is more than one item.
//!
//! rayon starts its pool (a thread per core) the first time it is used,
//! even for one item, and the idle threads then spin (`sched_yield`) for a
//! while: a one-file rewind or capture paid for two threads that competed
//! with it for the CPU while it waited on the disk. One item is done on
//! the calling thread instead.

use rayon::prelude::*;

/// `f` of every item, in order: on every core for two items or more, on
/// this thread for one.
pub(crate) fn map<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync + Send) -> Vec<R> {
    if items.len() <= 1 {
        items.iter().map(f).collect()
    } else {
        items.par_iter().map(f).collect()
    }
}

/// `f` of every item and its index, in order, as [`map`].
pub(crate) fn map_indexed<T: Sync, R: Send>(
    items: &[T],
    f: impl Fn(usize, &T) -> R + Sync + Send,
) -> Vec<R> {
    if items.len() <= 1 {
        items.iter().enumerate().map(|(i, t)| f(i, t)).collect()
    } else {
        items.par_iter().enumerate().map(|(i, t)| f(i, t)).collect()
    }
}

/// Drops `value` on the pool, not on this thread.
pub(crate) fn drop_later<T: Send + 'static>(value: T) {
    rayon::spawn(move || drop(value));
}

#[cfg(test)]
mod tests {
    #[test]
    fn results_come_back_in_order() {
        let items: Vec<u32> = (0..100).collect();
        assert_eq!(
            super::map(&items, |x| x * 2),
            (0..100).map(|x| x * 2).collect::<Vec<_>>()
        );
        assert_eq!(super::map(&[7u32], |x| x + 1), vec![8]);
        assert!(super::map(&[] as &[u32], |x| *x).is_empty());
        assert_eq!(
            super::map_indexed(&items, |i, x| (i, *x)),
            (0..100).map(|x| (x as usize, x)).collect::<Vec<_>>()
        );
    }
}
