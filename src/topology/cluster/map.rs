//! A cluster's slot map: which master serves each of the 16384 hash slots, as a `CLUSTER SLOTS`
//! reply tells it and `MOVED` replies amend it, and every node it names (where to discover the
//! cluster from next time).
//!
//! May use: nothing of the crate (it reads `redis` values).

use redis::Value;

/// Slots in a Redis Cluster.
pub(super) const SLOTS: usize = 16384;
/// No master serves the slot.
pub(super) const NO_MASTER: u16 = u16::MAX;

/// Which master serves each slot.
pub(super) struct Map {
    /// Per slot, an index into `masters`, or [`NO_MASTER`].
    pub(super) owner: Vec<u16>,
    /// Sorted by address.
    pub(super) masters: Vec<(String, u16)>,
    /// Every node the map names, replicas included: where to discover the cluster from next
    /// time, should the URL's seeds be gone.
    pub(super) nodes: Vec<(String, u16)>,
    /// The node that told it, once [`Cluster::discover`](super::Cluster::discover) has read it.
    pub(super) source: Option<(String, u16)>,
}

impl Map {
    /// Reads a `CLUSTER SLOTS` reply: `[start, end, [host, port, id, …], replicas…]` per
    /// range. An empty host (a node that does not know its own address) is the one asked.
    pub(super) fn read(reply: &Value, asked: &str) -> Option<Map> {
        let Value::Array(ranges) = reply else {
            return None;
        };
        let mut spans = Vec::new();
        let mut nodes = Vec::new();
        for range in ranges {
            let Value::Array(parts) = range else {
                return None;
            };
            let (Some(Value::Int(start)), Some(Value::Int(end))) = (parts.first(), parts.get(1))
            else {
                return None;
            };
            let mut members = parts[2..].iter().map(|n| member(n, asked));
            let (host, port) = members.next()??;
            nodes.extend(members.flatten());
            let (start, end) = (usize::try_from(*start).ok()?, usize::try_from(*end).ok()?);
            if start > end || end >= SLOTS {
                return None;
            }
            nodes.push((host.clone(), port));
            spans.push((start, end, (host, port)));
        }
        let mut masters: Vec<(String, u16)> = spans.iter().map(|(_, _, m)| m.clone()).collect();
        masters.sort();
        masters.dedup();
        let mut owner = vec![NO_MASTER; SLOTS];
        for (start, end, master) in &spans {
            let i = masters.binary_search(master).ok()? as u16;
            owner[*start..=*end].fill(i);
        }
        nodes.sort();
        nodes.dedup();
        Some(Map {
            owner,
            masters,
            nodes,
            source: None,
        })
    }

    /// Gives `slot` to the master at `at` (a `MOVED` said so), and drops masters left without
    /// a slot; the masters stay sorted.
    pub(super) fn assign(&mut self, slot: usize, at: &(String, u16)) {
        let index = match self.masters.iter().position(|m| m == at) {
            Some(i) => i,
            None => {
                self.masters.push(at.clone());
                self.masters.len() - 1
            }
        };
        self.owner[slot] = index as u16;
        let mut used: Vec<(String, u16, usize)> = self
            .masters
            .iter()
            .enumerate()
            .filter(|(i, _)| self.owner.contains(&(*i as u16)))
            .map(|(i, (host, port))| (host.clone(), *port, i))
            .collect();
        used.sort();
        let mut renumber = vec![NO_MASTER; self.masters.len()];
        for (new, (_, _, old)) in used.iter().enumerate() {
            renumber[*old] = new as u16;
        }
        for m in &mut self.owner {
            if *m != NO_MASTER {
                *m = renumber[usize::from(*m)];
            }
        }
        self.masters = used.into_iter().map(|(h, p, _)| (h, p)).collect();
    }
}

/// A node of a `CLUSTER SLOTS` range, `[host, port, id, …]`: its host (the one asked when it
/// reports none) and port.
fn member(node: &Value, asked: &str) -> Option<(String, u16)> {
    let Value::Array(fields) = node else {
        return None;
    };
    let host = match fields.first()? {
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::SimpleString(s) => s.clone(),
        Value::Nil => String::new(),
        _ => return None,
    };
    let host = if host.is_empty() || host == "?" {
        asked.to_owned()
    } else {
        host
    };
    let Some(Value::Int(port)) = fields.get(1) else {
        return None;
    };
    Some((host, u16::try_from(*port).ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_cluster_slots() {
        let b = |s: &str| Value::BulkString(s.as_bytes().to_vec());
        let node = |host: &str, port: i64| Value::Array(vec![b(host), Value::Int(port), b("id")]);
        let reply = Value::Array(vec![
            Value::Array(vec![
                Value::Int(0),
                Value::Int(8191),
                node("10.0.0.2", 7001),
                node("10.0.0.9", 7009),
            ]),
            Value::Array(vec![Value::Int(8192), Value::Int(16383), node("", 7000)]),
        ]);
        let map = Map::read(&reply, "seed").unwrap();
        assert_eq!(
            map.masters,
            vec![("10.0.0.2".to_owned(), 7001), ("seed".to_owned(), 7000)]
        );
        assert_eq!(map.owner[0], 0);
        assert_eq!(map.owner[8191], 0);
        assert_eq!(map.owner[8192], 1);
        assert_eq!(map.owner[16383], 1);
        assert_eq!(
            map.nodes,
            vec![
                ("10.0.0.2".to_owned(), 7001),
                ("10.0.0.9".to_owned(), 7009),
                ("seed".to_owned(), 7000)
            ]
        );
        assert!(Map::read(&Value::Nil, "seed").is_none());

        // A MOVED of slot 0 to a new master; the old one keeps the rest of its range.
        let mut map = map;
        map.assign(0, &("10.0.0.1".to_owned(), 7005));
        assert_eq!(map.masters[0], ("10.0.0.1".to_owned(), 7005));
        assert_eq!(map.owner[0], 0);
        assert_eq!(map.masters[usize::from(map.owner[1])].1, 7001);
        assert_eq!(map.masters[usize::from(map.owner[16383])].1, 7000);
        // A master left without a slot is dropped.
        let mut one = Map::read(
            &Value::Array(vec![Value::Array(vec![
                Value::Int(0),
                Value::Int(0),
                node("a", 1),
            ])]),
            "seed",
        )
        .unwrap();
        one.assign(0, &("b".to_owned(), 2));
        assert_eq!(one.masters, vec![("b".to_owned(), 2)]);
        assert_eq!(one.owner[0], 0);
        assert_eq!(one.owner[1], NO_MASTER);
    }
}
