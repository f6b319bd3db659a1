//! Parsers for the /proc files the capacity timeline samples; shared by the
//! collector and the runtime's own sampler thread, so they never allocate.

fn parse_u64(s: &[u8]) -> Option<u64> {
    let mut v: u64 = 0;
    let mut any = false;
    for &c in s {
        if c.is_ascii_digit() {
            v = v.checked_mul(10)?.checked_add((c - b'0') as u64)?;
            any = true;
        } else if any {
            break;
        }
    }
    any.then_some(v)
}

/// `/proc/PID/statm`: (resident pages, shared pages).
pub fn statm(buf: &[u8]) -> Option<(u64, u64)> {
    let mut fields = buf.split(|&c| c == b' ');
    let _size = fields.next()?;
    let resident = parse_u64(fields.next()?)?;
    let shared = parse_u64(fields.next()?)?;
    Some((resident, shared))
}

/// Field `n` of `/proc/PID/stat` after the command name (0: the state,
/// 1: the parent, 7: minor faults, 9: major faults); the name may hold
/// spaces and parentheses, so the fields start after its last `)`.
pub fn stat_field(buf: &[u8], n: usize) -> Option<u64> {
    let close = buf.iter().rposition(|&c| c == b')')?;
    let mut fields = buf[close + 1..]
        .split(|&c| c == b' ')
        .filter(|f| !f.is_empty());
    parse_u64(fields.nth(n)?)
}

/// A `Key:   123 kB` line of `/proc/PID/status` or `smaps_rollup`, in bytes.
pub fn kb_field(buf: &[u8], key: &[u8]) -> Option<u64> {
    for line in buf.split(|&c| c == b'\n') {
        if line.len() > key.len() && line.starts_with(key) && line[key.len()] == b':' {
            return parse_u64(&line[key.len() + 1..]).map(|kb| kb * 1024);
        }
    }
    None
}

/// One line of `/proc/PID/maps`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MapsLine<'a> {
    pub start: u64,
    pub end: u64,
    /// `rwxp` / `rw-s` ...
    pub perms: [u8; 4],
    pub offset: u64,
    /// A path, `[heap]`, `[stack]`, `[vdso]`, ...; empty when anonymous.
    pub name: &'a [u8],
}

impl MapsLine<'_> {
    /// PROT_* bits of the permissions.
    pub fn prot(&self) -> u32 {
        (self.perms[0] == b'r') as u32
            | ((self.perms[1] == b'w') as u32) << 1
            | ((self.perms[2] == b'x') as u32) << 2
    }
}

fn hex(s: &[u8]) -> Option<u64> {
    if s.is_empty() || s.len() > 16 {
        return None;
    }
    s.iter().try_fold(0u64, |v, &c| {
        Some(v << 4 | (c as char).to_digit(16)? as u64)
    })
}

/// `start-end perms offset dev inode [name]`; the name may hold spaces.
pub fn maps_line(line: &[u8]) -> Option<MapsLine<'_>> {
    let mut rest = line;
    let mut field = || {
        while rest.first() == Some(&b' ') {
            rest = &rest[1..];
        }
        let end = rest.iter().position(|&c| c == b' ').unwrap_or(rest.len());
        let (f, r) = rest.split_at(end);
        rest = r;
        Some(f).filter(|f| !f.is_empty())
    };
    let range = field()?;
    let dash = range.iter().position(|&c| c == b'-')?;
    let perms: [u8; 4] = field()?.try_into().ok()?;
    let offset = hex(field()?)?;
    let (_dev, _inode) = (field()?, field()?);
    let name = rest.trim_ascii();
    Some(MapsLine {
        start: hex(&range[..dash])?,
        end: hex(&range[dash + 1..])?,
        perms,
        offset,
        name,
    })
}

/// Fills a timeline record's rss/anon/file/shmem/swap from `status` contents.
pub fn fill_from_status(buf: &[u8], t: &mut super::Timeline) {
    t.rss = kb_field(buf, b"VmRSS").unwrap_or(0);
    t.anon = kb_field(buf, b"RssAnon").unwrap_or(0);
    t.file = kb_field(buf, b"RssFile").unwrap_or(0);
    t.shmem = kb_field(buf, b"RssShmem").unwrap_or(0);
    t.swap = kb_field(buf, b"VmSwap").unwrap_or(0);
}
