//! What every rung sends and checks: the writer's ring of stamped blocks,
//! and the reader's check of each block's sequence number and checksum.

use labkit::error::{Error, Result};
use labkit::memory::PAGE;

use pipespeed2::fill;

use super::Check;
use crate::ring::{Backing, Mapping};

/// The writer's blocks: `slots` page-aligned slots, each holding the
/// pattern (`pipespeed2::pattern`'s), stamped with a sequence number when sent.
pub struct Ring {
    mem: Mapping,
    block: usize,
    stride: usize,
    slots: u64,
}

impl Ring {
    pub fn new(slots: u64, block: usize, huge: bool) -> Result<Ring> {
        let stride = block.div_ceil(PAGE) * PAGE;
        let len = usize::try_from(slots)
            .ok()
            .and_then(|s| s.checked_mul(stride))
            .ok_or_else(|| {
                Error::usage(format!("a ring of {slots} slots is too large"))
            })?;
        let mut mem = Mapping::new(len, huge)?;
        for slot in mem.chunks_mut(stride) {
            fill(&mut slot[..block]);
        }
        Ok(Ring { mem, block, stride, slots })
    }

    /// Stamp block `seq` into its slot and return the slot's bytes.
    pub fn stamp(&mut self, seq: u64) -> &[u8] {
        let at = (seq % self.slots) as usize * self.stride;
        let slot = &mut self.mem[at..at + self.block];
        let h = header_len(self.block);
        slot[..h].copy_from_slice(&seq.to_le_bytes()[..h]);
        slot
    }

    pub fn backing(&self) -> Backing {
        self.mem.backing
    }
}

/// The sequence number takes the block's first 8 bytes, or all of a
/// shorter block (then it is the number modulo 256^len).
fn header_len(block: usize) -> usize {
    block.min(8)
}

// ANCHOR: checksum
/// A Fletcher-style checksum over little-endian 64-bit words, four lanes
/// at a time (the last words padded with zeros): the sum of the words, and
/// the sum of the running sums, so that a word moved elsewhere shows too.
pub fn checksum(bytes: &[u8]) -> (u64, u64) {
    let (mut a, mut b) = ([0u64; 4], [0u64; 4]);
    let mut add = |chunk: &[u8]| {
        for (l, word) in chunk.chunks_exact(8).enumerate() {
            let w = u64::from_le_bytes(word.try_into().expect("8 bytes"));
            a[l] = a[l].wrapping_add(w);
            b[l] = b[l].wrapping_add(a[l]);
        }
    };
    let mut chunks = bytes.chunks_exact(32);
    for chunk in &mut chunks {
        add(chunk);
    }
    if !chunks.remainder().is_empty() {
        let mut last = [0u8; 32];
        last[..chunks.remainder().len()].copy_from_slice(chunks.remainder());
        add(&last);
    }
    let sum = |v: [u64; 4]| v.iter().fold(0u64, |s, &x| s.wrapping_add(x));
    (sum(a), sum(b))
}
// ANCHOR_END: checksum

/// What is wrong with a block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bad {
    /// It carried another block's sequence number: the writer had stamped
    /// its slot again before the reader read it.
    Sequence { found: u64 },
    /// Its checksum (or a byte) differs from what was sent.
    Bytes,
    /// The stream ended within it.
    Short { len: usize },
}

/// What the reader expects of block `seq`: the pattern, stamped.
pub struct Expect {
    template: Vec<u8>,
    check: Check,
    /// The checksum of the template with its header zero, and the weight
    /// of the header word in the second sum (the number of 32-byte chunks).
    zero: (u64, u64),
    chunks: u64,
}

impl Expect {
    pub fn new(block: usize, check: Check) -> Expect {
        let mut template = vec![0u8; block];
        fill(&mut template);
        template[..header_len(block)].fill(0);
        Expect {
            zero: checksum(&template),
            chunks: block.div_ceil(32) as u64,
            template,
            check,
        }
    }

    /// Does `got` hold block `seq`? The checksum is linear in the header
    /// word, so the expected value is the template's plus its share.
    pub fn check(&self, seq: u64, got: &[u8]) -> Result<(), Bad> {
        if got.len() != self.template.len() {
            return Err(Bad::Short { len: got.len() });
        }
        let h = header_len(got.len());
        let mut word = [0u8; 8];
        word[..h].copy_from_slice(&got[..h]);
        let found = u64::from_le_bytes(word);
        let mask = if h == 8 { u64::MAX } else { (1u64 << (8 * h)) - 1 };
        if found != seq & mask {
            return Err(Bad::Sequence { found });
        }
        let ok = match self.check {
            Check::Checksum => {
                let (a, b) = checksum(got);
                a == self.zero.0.wrapping_add(found)
                    && b == self.zero.1.wrapping_add(found.wrapping_mul(self.chunks))
            }
            Check::Bytes => got[h..] == self.template[h..],
        };
        if ok { Ok(()) } else { Err(Bad::Bytes) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_check_catches_a_changed_byte_a_swap_and_a_stale_block() {
        for block in [1usize, 7, 8, 33, 4095, 65537] {
            let mut ring = Ring::new(2, block, false).unwrap();
            let expect = Expect::new(block, Check::Checksum);
            let exact = Expect::new(block, Check::Bytes);
            let sent = ring.stamp(5).to_vec();
            assert_eq!(expect.check(5, &sent), Ok(()), "{block}");
            assert_eq!(exact.check(5, &sent), Ok(()), "{block}");
            // Another block's number: what a reused slot looks like.
            let stale = ring.stamp(6).to_vec();
            assert_eq!(expect.check(5, &stale), Err(Bad::Sequence { found: 6 }));
            for at in [block - 1, block / 2, block.min(9) - 1] {
                let mut changed = sent.clone();
                changed[at] ^= 0x10;
                let e = expect.check(5, &changed);
                assert!(matches!(e, Err(Bad::Bytes | Bad::Sequence { .. })), "{at}");
                assert!(exact.check(5, &changed).is_err(), "{block} {at}");
            }
            if block >= 48 {
                // Two words swapped keep the sum but not the running sum.
                let mut swapped = sent.clone();
                let (x, y) = swapped.split_at_mut(40);
                x[8..16].swap_with_slice(&mut y[..8]);
                assert_ne!(swapped, sent);
                assert_eq!(expect.check(5, &swapped), Err(Bad::Bytes), "{block}");
            }
            assert_eq!(
                expect.check(5, &sent[..block - 1]),
                Err(Bad::Short { len: block - 1 })
            );
        }
    }
}
