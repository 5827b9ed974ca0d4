//! What a live worker's companion file (native histograms, exemplars) gained
//! since it was last parsed, read through its map: the one rule both kept
//! maps follow. A companion's entries are appended and never move, so a
//! reader parses the bytes from where it stopped up to `used`.

use multiprom_format::read_map::ReadMap;

/// Why the bytes could not be had through the map.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum MapTrouble {
    /// `used` is past the map: map the file again at its new size.
    Outgrown,
    /// The file shrank under the map.
    Shrunk,
    /// `used` went back (the file was rewritten in place), or the bytes
    /// are not in the map: read it with `pread`, which says what is wrong.
    Unreadable,
}

/// Copies the file's bytes from offset 0 up to `used` into `bytes` when
/// `used` moved past `parsed_up_to`: `Ok(Some(used))`; `Ok(None)` when
/// nothing was appended.
pub(super) fn copy_appended(
    map: &ReadMap,
    parsed_up_to: usize,
    bytes: &mut Vec<u8>,
) -> Result<Option<usize>, MapTrouble> {
    let used = match map.read(|view| view.u32_acquire(0)) {
        Ok(used) => used.unwrap_or(0) as usize,
        Err(_) => return Err(MapTrouble::Shrunk),
    };
    if used > map.len() {
        return Err(MapTrouble::Outgrown);
    }
    if used < parsed_up_to {
        return Err(MapTrouble::Unreadable);
    }
    if used == parsed_up_to {
        return Ok(None);
    }
    bytes.clear();
    match map.read(|view| view.copy_to(0, used, bytes)) {
        Ok(true) => Ok(Some(used)),
        Ok(false) => Err(MapTrouble::Unreadable),
        Err(_) => Err(MapTrouble::Shrunk),
    }
}
