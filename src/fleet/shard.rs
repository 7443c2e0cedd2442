//! `--shard I/N`: which repositories this worker takes, with no coordinator (DESIGN section 13).
//!
//! A repository's shard depends on its normalised name alone ([`super::list`]): the first eight
//! bytes of the name's SHA-256, read big-endian, are the key of Lamping and Veach's jump
//! consistent hash over N buckets (the `jumpch` crate). So:
//! - N workers given `0/N` .. `N-1/N` take every repository exactly once, each deciding alone;
//! - adding or removing other repositories never moves a repository to another shard;
//! - changing N to N+1 moves only the repositories that must move (about one in N+1), so the
//!   workers' clones, caches and dashboards mostly stay where they were.
//!
//! The recipe is stated exactly so another tool can compute the same split.

use sha2::{Digest, Sha256};

/// Largest N accepted; far more workers than any fleet needs.
pub(crate) const MAX_SHARDS: u32 = 10_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Shard {
    pub index: u32,
    pub count: u32,
}

impl std::str::FromStr for Shard {
    type Err = String;

    /// `I/N` with `0 <= I < N`, as `JOB_COMPLETION_INDEX` and a matrix's job index count.
    fn from_str(text: &str) -> Result<Self, String> {
        let invalid = || format!("invalid `--shard` {text:?}: expected I/N with 0 <= I < N, e.g. 0/4");
        let (index, count) = text.trim().split_once('/').ok_or_else(invalid)?;
        let index: u32 = index.trim().parse().map_err(|_| invalid())?;
        let count: u32 = count.trim().parse().map_err(|_| invalid())?;
        if count == 0 || index >= count {
            return Err(invalid());
        }
        if count > MAX_SHARDS {
            return Err(format!("invalid `--shard` {text:?}: at most {MAX_SHARDS} shards"));
        }
        Ok(Shard { index, count })
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// The shard (0..count) of a repository with this normalised name. `count` must be at least 1.
pub(crate) fn shard_of(key: &str, count: u32) -> u32 {
    let digest = Sha256::digest(key.as_bytes());
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    jumpch::hash(u64::from_be_bytes(first), count.max(1))
}

impl Shard {
    pub(crate) fn contains(&self, key: &str) -> bool {
        shard_of(key, self.count) == self.index
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(count: usize) -> Vec<String> {
        (0..count).map(|i| format!("octo/repo-{i:04}")).collect()
    }

    #[test]
    fn n_shards_cover_every_repository_exactly_once() {
        let fleet = names(1000);
        for count in [1, 2, 3, 4, 7, 16] {
            let mut sizes = vec![0usize; count as usize];
            for name in &fleet {
                let taken: Vec<u32> = (0..count)
                    .filter(|&index| Shard { index, count }.contains(name))
                    .collect();
                assert_eq!(taken.len(), 1, "{name} in {count} shards: {taken:?}");
                sizes[taken[0] as usize] += 1;
            }
            // Balanced enough to be useful: no shard more than twice its fair share.
            let fair = fleet.len() / count as usize;
            assert!(sizes.iter().all(|&size| size <= 2 * fair + 10), "{count}: {sizes:?}");
        }
    }

    #[test]
    fn growing_the_shard_count_moves_only_what_must_move() {
        let fleet = names(2000);
        let moved = fleet
            .iter()
            .filter(|name| shard_of(name, 4) != shard_of(name, 5))
            .count();
        // Jump hash moves about 1/5 of the keys from 4 to 5 buckets; `hash % n` would move ~4/5.
        assert!(moved < fleet.len() * 3 / 10, "{moved} of {} moved", fleet.len());
        // Every moved repository went to the new shard, none between old ones.
        assert!(
            fleet
                .iter()
                .filter(|name| shard_of(name, 4) != shard_of(name, 5))
                .all(|name| shard_of(name, 5) == 4)
        );
    }

    #[test]
    fn the_split_is_the_documented_recipe() {
        // Pinned, so the recipe cannot change unnoticed (which would reshuffle every fleet).
        let digest = Sha256::digest(b"octo/widgets");
        let key = u64::from_be_bytes(digest[..8].try_into().expect("eight bytes"));
        assert_eq!(shard_of("octo/widgets", 8), jumpch::hash(key, 8u32));
        assert_eq!(
            (0..8).map(|n| shard_of("octo/widgets", n + 1)).collect::<Vec<_>>(),
            PINNED_OCTO_WIDGETS
        );
    }

    /// shard_of("octo/widgets", 1..=8), computed independently from the recipe (the paper's
    /// algorithm over the first eight bytes of the name's SHA-256, in Python).
    const PINNED_OCTO_WIDGETS: [u32; 8] = [0, 0, 0, 0, 4, 5, 5, 7];

    #[test]
    fn shard_syntax() {
        assert_eq!("2/4".parse::<Shard>(), Ok(Shard { index: 2, count: 4 }));
        assert_eq!(" 0 / 1 ".parse::<Shard>(), Ok(Shard { index: 0, count: 1 }));
        for bad in ["4/4", "1/0", "-1/4", "a/4", "3", "", "1/20000"] {
            assert!(bad.parse::<Shard>().is_err(), "{bad}");
        }
    }
}
