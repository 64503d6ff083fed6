//! The reader's byte scans, eight bytes (one `u64` word) at a time, and the hex digits of a
//! `\u` escape.

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGHS: u64 = 0x8080_8080_8080_8080;

/// The bytes of `word` a string scan must stop at: `"`, `\`, control characters, non-ASCII.
pub(super) fn special(word: u64) -> u64 {
    bytes_equal_to(word, b'"')
        | bytes_equal_to(word, b'\\')
        | ((word.wrapping_sub(ONES * 0x20) | word) & HIGHS)
}

/// The high bit of each byte of `word` that is `byte`. The lowest one set is exact; a borrow
/// can also mark a byte above a match, so only the first match is to be trusted.
pub(super) fn bytes_equal_to(word: u64, byte: u8) -> u64 {
    let x = word ^ (ONES * u64::from(byte));
    x.wrapping_sub(ONES) & !x & HIGHS
}

/// The first `\\` of `bytes` from `from` on, eight bytes at a time.
pub(super) fn find_backslash(bytes: &[u8], from: usize) -> Option<usize> {
    let mut i = from;
    while i + 8 <= bytes.len() {
        let mut word = [0u8; 8];
        word.copy_from_slice(&bytes[i..i + 8]);
        let hits = bytes_equal_to(u64::from_le_bytes(word), b'\\');
        if hits != 0 {
            return Some(i + (hits.trailing_zeros() / 8) as usize);
        }
        i += 8;
    }
    bytes[i.min(bytes.len())..]
        .iter()
        .position(|&b| b == b'\\')
        .map(|p| i + p)
}

/// `a == b`, eight bytes at a time. A config's bulk is file contents, and the guest's `memcmp`
/// (wasi-libc's) compares one byte per iteration: comparing the unchanged files that way would be a
/// tenth of a token rotation's instructions.
pub fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let (a_words, a_rest) = a.split_at(a.len() - a.len() % 8);
    let (b_words, b_rest) = b.split_at(a_words.len());
    let word = |chunk: &[u8]| u64::from_le_bytes(chunk.try_into().unwrap_or([0; 8]));
    a_words
        .chunks_exact(8)
        .zip(b_words.chunks_exact(8))
        .all(|(x, y)| word(x) == word(y))
        && a_rest.iter().zip(b_rest).all(|(x, y)| x == y)
}

fn hex(b: u8) -> u32 {
    match b {
        b'0'..=b'9' => u32::from(b - b'0'),
        b'a'..=b'f' => u32::from(b - b'a' + 10),
        b'A'..=b'F' => u32::from(b - b'A' + 10),
        _ => 0,
    }
}

pub(super) fn hex4(bytes: &[u8]) -> u32 {
    bytes.iter().take(4).fold(0, |n, &b| (n << 4) | hex(b))
}
