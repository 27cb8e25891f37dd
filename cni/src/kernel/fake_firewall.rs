//! An in-memory nat table per family for unit tests: applies iptables-restore text the way
//! `--noflush` does (all or nothing; `-D` of a rule that is not there fails) and renders
//! iptables-save text back.

use std::cell::{Cell, RefCell};
use std::io;

use crate::masq::Firewall;

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct NatTable {
    pub chains: Vec<String>,
    /// Rules as appended: "CHAIN rest-of-rule".
    pub rules: Vec<String>,
}

#[derive(Default)]
pub struct FakeFirewall {
    /// [IPv4, IPv6].
    pub tables: RefCell<[NatTable; 2]>,
    /// Restores for this family fail (false: IPv4, true: IPv6), as when the tool is missing.
    pub broken: Cell<Option<bool>>,
}

impl FakeFirewall {
    pub fn table(&self, v6: bool) -> NatTable {
        self.tables.borrow()[usize::from(v6)].clone()
    }
}

fn apply(table: &mut NatTable, text: &str) -> io::Result<()> {
    let bad = |line: &str| io::Error::other(format!("iptables-restore: cannot apply {line:?}"));
    for line in text.lines() {
        let mut words = line.splitn(2, ' ');
        match (words.next().unwrap_or(""), words.next()) {
            ("*nat", None) | ("COMMIT", None) => {}
            (decl, Some("- [0:0]")) if decl.starts_with(':') => {
                let chain = decl[1..].to_string();
                if !table.chains.contains(&chain) {
                    table.chains.push(chain);
                }
            }
            ("-A", Some(rule)) => table.rules.push(rule.to_string()),
            ("-D", Some(rule)) => {
                let at = table.rules.iter().position(|r| r == rule);
                table.rules.remove(at.ok_or_else(|| bad(line))?);
            }
            ("-F", Some(chain)) => table.rules.retain(|r| !r.starts_with(&format!("{chain} "))),
            ("-X", Some(chain)) => {
                let at = table.chains.iter().position(|c| c == chain);
                table.chains.remove(at.ok_or_else(|| bad(line))?);
            }
            _ => return Err(bad(line)),
        }
    }
    Ok(())
}

impl Firewall for FakeFirewall {
    fn save_nat(&self, v6: bool) -> io::Result<String> {
        let t = self.table(v6);
        let mut out = String::from("*nat\n:POSTROUTING ACCEPT [0:0]\n");
        for c in &t.chains {
            out.push_str(&format!(":{c} - [0:0]\n"));
        }
        for r in &t.rules {
            out.push_str(&format!("-A {r}\n"));
        }
        out.push_str("COMMIT\n");
        Ok(out)
    }

    fn restore_nat(&self, v6: bool, text: &str) -> io::Result<()> {
        if self.broken.get() == Some(v6) {
            return Err(io::Error::other("iptables-restore: lock timeout"));
        }
        let mut tables = self.tables.borrow_mut();
        let mut copy = tables[usize::from(v6)].clone();
        apply(&mut copy, text)?;
        tables[usize::from(v6)] = copy;
        Ok(())
    }
}
