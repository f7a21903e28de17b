//! A compact directed graph over transaction positions, with iterative
//! (stack-safe) strongly connected components and short-cycle search.

use std::collections::VecDeque;

const UNSEEN: u32 = u32::MAX;

/// Adjacency in compressed sparse row form, duplicate edges removed.
pub(crate) struct Graph {
    offsets: Vec<u32>,
    targets: Vec<u32>,
}

impl Graph {
    /// Builds the graph of `n` vertices from `(from, to)` pairs.
    pub fn from_edges(n: usize, edges: &[(u32, u32)]) -> Graph {
        let mut offsets = vec![0u32; n + 1];
        for &(from, _) in edges {
            offsets[from as usize + 1] += 1;
        }
        for i in 0..n {
            offsets[i + 1] += offsets[i];
        }
        let mut fill = offsets.clone();
        let mut targets = vec![0u32; edges.len()];
        for &(from, to) in edges {
            let slot = &mut fill[from as usize];
            targets[*slot as usize] = to;
            *slot += 1;
        }
        let mut g = Graph { offsets, targets };
        g.dedup();
        g
    }

    /// Sorts each adjacency list and drops repeated targets, compacting in place.
    fn dedup(&mut self) {
        let mut write = 0usize;
        let mut start = 0usize;
        for v in 0..self.offsets.len() - 1 {
            let end = self.offsets[v + 1] as usize;
            self.targets[start..end].sort_unstable();
            let begin = write;
            for i in start..end {
                let t = self.targets[i];
                if write == begin || self.targets[write - 1] != t {
                    self.targets[write] = t;
                    write += 1;
                }
            }
            self.offsets[v] = begin as u32;
            start = end;
        }
        let n = self.offsets.len() - 1;
        self.offsets[n] = write as u32;
        self.targets.truncate(write);
    }

    /// Number of vertices.
    pub fn len(&self) -> usize {
        self.offsets.len() - 1
    }

    /// Distinct edges after deduplication.
    pub fn edge_count(&self) -> usize {
        self.targets.len()
    }

    /// Successors of `v`.
    pub fn successors(&self, v: u32) -> &[u32] {
        let v = v as usize;
        &self.targets[self.offsets[v] as usize..self.offsets[v + 1] as usize]
    }

    /// Strongly connected components with more than one vertex (Tarjan's
    /// algorithm with an explicit call stack).
    pub fn nontrivial_sccs(&self) -> Vec<Vec<u32>> {
        let n = self.len();
        let mut index = vec![UNSEEN; n];
        let mut low = vec![0u32; n];
        let mut on_stack = vec![false; n];
        let mut stack: Vec<u32> = Vec::new();
        let mut calls: Vec<(u32, usize)> = Vec::new();
        let mut next_index = 0u32;
        let mut out = Vec::new();
        for root in 0..n as u32 {
            if index[root as usize] != UNSEEN {
                continue;
            }
            let mut pending = Some(root);
            loop {
                if let Some(v) = pending.take() {
                    index[v as usize] = next_index;
                    low[v as usize] = next_index;
                    next_index += 1;
                    on_stack[v as usize] = true;
                    stack.push(v);
                    calls.push((v, 0));
                }
                let Some(&mut (v, ref mut pos)) = calls.last_mut() else {
                    break;
                };
                if let Some(&w) = self.successors(v).get(*pos) {
                    *pos += 1;
                    if index[w as usize] == UNSEEN {
                        pending = Some(w);
                    } else if on_stack[w as usize] {
                        low[v as usize] = low[v as usize].min(index[w as usize]);
                    }
                    continue;
                }
                calls.pop();
                if let Some(&(parent, _)) = calls.last() {
                    low[parent as usize] = low[parent as usize].min(low[v as usize]);
                }
                if low[v as usize] == index[v as usize] {
                    let mut comp = Vec::new();
                    loop {
                        let w = stack.pop().expect("tarjan stack holds the component");
                        on_stack[w as usize] = false;
                        comp.push(w);
                        if w == v {
                            break;
                        }
                    }
                    if comp.len() > 1 {
                        out.push(comp);
                    }
                }
            }
        }
        out
    }

    /// A short cycle inside a strongly connected component, as its vertices
    /// in order (the last one has an edge back to the first). Runs
    /// breadth-first searches from successive members until `budget` edge
    /// visits are spent and keeps the shortest cycle found; the first search
    /// always completes, so a cycle is always returned.
    pub fn short_cycle(&self, scc: &[u32], budget: usize) -> Vec<u32> {
        let n = self.len();
        let mut member = vec![false; n];
        for &v in scc {
            member[v as usize] = true;
        }
        let mut seen = vec![UNSEEN; n];
        let mut parent = vec![UNSEEN; n];
        let mut depth = vec![0u32; n];
        let mut best: Vec<u32> = Vec::new();
        let mut spent = 0usize;
        let mut queue = VecDeque::new();
        for (round, &start) in scc.iter().enumerate() {
            if best.len() == 2 || (!best.is_empty() && spent >= budget) {
                break;
            }
            let round = round as u32;
            queue.clear();
            seen[start as usize] = round;
            depth[start as usize] = 0;
            queue.push_back(start);
            'bfs: while let Some(v) = queue.pop_front() {
                let len_through_v = depth[v as usize] as usize + 1;
                if !best.is_empty() && len_through_v >= best.len() {
                    break;
                }
                for &w in self.successors(v) {
                    spent += 1;
                    if !member[w as usize] {
                        continue;
                    }
                    if w == start {
                        best = path_to(v, start, &parent);
                        break 'bfs;
                    }
                    if seen[w as usize] != round {
                        seen[w as usize] = round;
                        parent[w as usize] = v;
                        depth[w as usize] = depth[v as usize] + 1;
                        queue.push_back(w);
                    }
                }
            }
        }
        best
    }
}

/// The BFS tree path `start -> ... -> end`.
fn path_to(end: u32, start: u32, parent: &[u32]) -> Vec<u32> {
    let mut path = vec![end];
    let mut v = end;
    while v != start {
        v = parent[v as usize];
        path.push(v);
    }
    path.reverse();
    path
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dedups_and_keeps_order() {
        let g = Graph::from_edges(3, &[(0, 2), (0, 1), (0, 2), (2, 0)]);
        assert_eq!(g.successors(0), &[1, 2]);
        assert_eq!(g.successors(1), &[] as &[u32]);
        assert_eq!(g.successors(2), &[0]);
        assert_eq!(g.edge_count(), 3);
    }

    #[test]
    fn finds_components() {
        let g = Graph::from_edges(6, &[(0, 1), (1, 2), (2, 0), (3, 4), (4, 3), (2, 3), (5, 5)]);
        let mut sccs: Vec<Vec<u32>> = g
            .nontrivial_sccs()
            .into_iter()
            .map(|mut c| {
                c.sort();
                c
            })
            .collect();
        sccs.sort();
        assert_eq!(sccs, vec![vec![0, 1, 2], vec![3, 4]]);
    }

    #[test]
    fn prefers_the_shorter_cycle() {
        // 0 -> 1 -> 2 -> 3 -> 0 and the shortcut 2 -> 1.
        let g = Graph::from_edges(4, &[(0, 1), (1, 2), (2, 3), (3, 0), (2, 1)]);
        let scc = &g.nontrivial_sccs()[0];
        let c = g.short_cycle(scc, usize::MAX);
        assert_eq!(c.len(), 2);
        assert!(c.contains(&1) && c.contains(&2));
    }

    #[test]
    fn deep_chain_does_not_overflow() {
        let n = 1_000_000u32;
        let mut edges: Vec<(u32, u32)> = (0..n - 1).map(|i| (i, i + 1)).collect();
        edges.push((n - 1, 0));
        let g = Graph::from_edges(n as usize, &edges);
        let sccs = g.nontrivial_sccs();
        assert_eq!(sccs.len(), 1);
        assert_eq!(g.short_cycle(&sccs[0], 0).len(), n as usize);
    }
}
