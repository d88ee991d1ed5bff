//! The archives: `.tar.gz` (and npm's tarballs, which are the same
//! format) and `.zip`, reproducible: entries in the order given, each
//! dated `mtime`, owned by 0, mode 0755 (executables) or 0644.

use std::io::Write;
use std::path::Path;

use anyhow::Context;

/// A file to archive: its path inside the archive (`/`-separated).
pub struct Entry {
    pub path: String,
    pub bytes: Vec<u8>,
    pub executable: bool,
}

impl Entry {
    pub fn new(path: String, bytes: Vec<u8>, executable: bool) -> Entry {
        Entry {
            path,
            bytes,
            executable,
        }
    }

    fn mode(&self) -> u32 {
        if self.executable { 0o755 } else { 0o644 }
    }
}

pub fn tar_gz(dest: &Path, entries: &[Entry], mtime: u64) -> anyhow::Result<()> {
    let ctx = || format!("cannot write {}", dest.display());
    let file = std::fs::File::create(dest).with_context(ctx)?;
    let gz = flate2::GzBuilder::new()
        // gzip's own date is 32 bits; 0 means none.
        .mtime(u32::try_from(mtime).unwrap_or(0))
        .write(std::io::BufWriter::new(file), flate2::Compression::best());
    let mut tar = tar::Builder::new(gz);
    for e in entries {
        let mut header = tar::Header::new_gnu();
        header.set_size(e.bytes.len() as u64);
        header.set_mode(e.mode());
        header.set_mtime(mtime);
        header.set_uid(0);
        header.set_gid(0);
        header.set_entry_type(tar::EntryType::Regular);
        tar.append_data(&mut header, &e.path, e.bytes.as_slice())
            .with_context(ctx)?;
    }
    let gz = tar.into_inner().with_context(ctx)?;
    let mut file = gz.finish().with_context(ctx)?;
    file.flush().with_context(ctx)?;
    Ok(())
}

pub fn zip(dest: &Path, entries: &[Entry], mtime: u64) -> anyhow::Result<()> {
    let ctx = || format!("cannot write {}", dest.display());
    let file = std::fs::File::create(dest).with_context(ctx)?;
    let mut zip = zip::ZipWriter::new(std::io::BufWriter::new(file));
    let (y, mo, d, h, mi, s) = civil(mtime);
    // Zip dates run from 1980 to 2107.
    let date = zip::DateTime::from_date_and_time(y.clamp(1980, 2107) as u16, mo, d, h, mi, s)
        .unwrap_or_default();
    for e in entries {
        let options = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated)
            .compression_level(Some(9))
            .unix_permissions(e.mode())
            .last_modified_time(date);
        zip.start_file(e.path.as_str(), options).with_context(ctx)?;
        zip.write_all(&e.bytes).with_context(ctx)?;
    }
    let mut file = zip.finish().with_context(ctx)?;
    file.flush().with_context(ctx)?;
    Ok(())
}

/// UTC year, month, day, hour, minute, second of a Unix time (Howard
/// Hinnant's civil-from-days).
fn civil(t: u64) -> (i64, u8, u8, u8, u8, u8) {
    let days = (t / 86_400) as i64;
    let secs = t % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u8;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u8;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (
        y,
        m,
        d,
        (secs / 3600) as u8,
        (secs % 3600 / 60) as u8,
        (secs % 60) as u8,
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn civil_dates() {
        assert_eq!(super::civil(0), (1970, 1, 1, 0, 0, 0));
        assert_eq!(super::civil(1_796_558_400), (2026, 12, 6, 12, 0, 0));
        assert_eq!(super::civil(951_782_400), (2000, 2, 29, 0, 0, 0));
    }
}
