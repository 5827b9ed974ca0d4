//! Remote-Write 2.0's symbols table: each string of a request once, its
//! labels, help texts and units referring to it by index.

use std::collections::HashMap;

/// A request's symbols, in the order first asked for.
#[derive(Debug)]
pub(super) struct Symbols {
    table: Vec<String>,
    refs: HashMap<String, u32>,
}

impl Symbols {
    /// A table holding only `""` at 0: the specification requires it
    /// first, so that an absent unit or help can refer to 0.
    pub(super) fn new() -> Symbols {
        Symbols {
            table: vec![String::new()],
            refs: HashMap::from([(String::new(), 0)]),
        }
    }

    /// The index of `symbol`, added at the end when it is new.
    pub(super) fn of(&mut self, symbol: &str) -> u32 {
        if let Some(&index) = self.refs.get(symbol) {
            return index;
        }
        // A request holds far fewer than 2^32 strings (receivers refuse
        // bodies beyond tens of MiB); saturating keeps this total.
        let index = u32::try_from(self.table.len()).unwrap_or(u32::MAX);
        self.table.push(symbol.to_owned());
        self.refs.insert(symbol.to_owned(), index);
        index
    }

    /// The refs of a label set: name, value, name, value…
    pub(super) fn refs(&mut self, labels: &[(&str, &str)]) -> Vec<u32> {
        labels
            .iter()
            .flat_map(|&(name, value)| [self.of(name), self.of(value)])
            .collect()
    }

    /// The table, as `Request.symbols`.
    pub(super) fn into_table(self) -> Vec<String> {
        self.table
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_string_once_after_the_empty_one() {
        let mut symbols = Symbols::new();
        assert_eq!(symbols.of(""), 0);
        assert_eq!(
            symbols.refs(&[("__name__", "up"), ("job", "up")]),
            [1, 2, 3, 2]
        );
        assert_eq!(symbols.of("job"), 3);
        assert_eq!(symbols.into_table(), ["", "__name__", "up", "job"]);
    }
}
