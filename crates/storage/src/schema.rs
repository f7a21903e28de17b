use thiserror::Error;

/// Index of a column within its schema.
pub type ColumnId = usize;

/// The type of a fixed-width column.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ColumnType {
    U64,
    I64,
    F64,
    /// Exactly `n` bytes.
    Fixed(u16),
    /// Up to `n` bytes, stored with a two-byte length prefix in `n + 2` bytes.
    Bounded(u16),
    /// An ordered tuple `(order, core, bytes)` with up to `n` bytes (see [`crate::ordered`]): the value
    /// of Doppel's `OPut`.
    Tuple(u16),
    /// A top-K set of at most `k` ordered tuples with up to `n` bytes each (see [`crate::ordered`]):
    /// the value of Doppel's `TopKInsert`.
    TopK {
        k: u8,
        n: u16,
    },
}

impl ColumnType {
    /// Bytes the column occupies in a row.
    pub const fn width(self) -> usize {
        match self {
            ColumnType::U64 | ColumnType::I64 | ColumnType::F64 => 8,
            ColumnType::Fixed(n) => n as usize,
            ColumnType::Bounded(n) => n as usize + 2,
            ColumnType::Tuple(n) => crate::ordered::tuple_width(n),
            ColumnType::TopK { k, n } => crate::ordered::topk_width(k, n),
        }
    }
}

/// A column with its place in the row: byte offset and the column group that holds it.
#[derive(Clone, Debug)]
pub struct Column {
    pub name: String,
    pub ty: ColumnType,
    pub group: usize,
    /// Byte offset of the column inside the row image.
    pub offset: usize,
}

impl Column {
    /// Row words (8-byte units) the column touches, as `first..=last`.
    pub fn word_span(&self) -> (usize, usize) {
        (self.offset / 8, (self.offset + self.ty.width() - 1) / 8)
    }
}

/// Where a column lies in the row words: its first and last word and, in each, the bits of its
/// bytes (when both are one word, `first_mask` holds the column's bits in it). Words between the two
/// belong to the column entirely.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WordSpan {
    pub first: usize,
    pub last: usize,
    pub first_mask: u64,
    pub last_mask: u64,
}

impl WordSpan {
    /// The span of `width` bytes at byte offset `offset`.
    fn of(offset: usize, width: usize) -> WordSpan {
        let (first, last) = (offset / 8, (offset + width - 1) / 8);
        let mask = |w: usize| {
            let lo = offset.max(w * 8) - w * 8;
            let hi = (offset + width).min(w * 8 + 8) - w * 8;
            if hi - lo == 8 {
                u64::MAX
            } else {
                ((1u64 << ((hi - lo) * 8)) - 1) << (lo * 8)
            }
        };
        WordSpan {
            first,
            last,
            first_mask: mask(first),
            last_mask: mask(last),
        }
    }
}

/// A column group: a word-aligned, contiguous run of the row that carries its own metadata.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Group {
    /// First row word of the group.
    pub word: usize,
    /// Number of row words of the group.
    pub words: usize,
    /// Columns of the group as a bit mask over column ids.
    pub columns: u64,
}

/// Errors in a schema definition.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum SchemaError {
    #[error("a schema needs at least one column")]
    Empty,
    #[error("a schema has at most 64 columns, got {0}")]
    TooManyColumns(usize),
    #[error("a schema has at most {max} column groups, got {got}", max = Schema::MAX_GROUPS)]
    TooManyGroups { got: usize },
    #[error("column group {0} has no columns; groups must be numbered 0..n without gaps")]
    EmptyGroup(usize),
    #[error("column `{0}` has zero width")]
    ZeroWidth(String),
    #[error("duplicate column name `{0}`")]
    DuplicateName(String),
    #[error("a regrouping gives {got} column groups for a schema of {want} columns")]
    GroupCount { got: usize, want: usize },
    #[error("a regrouped schema must have the same columns in the same order")]
    ColumnsDiffer,
    #[error(
        "column `{0}` has no group while others have one: declare a group for every column, or \
         for none (automatic groups)"
    )]
    MixedGroups(String),
}

/// The typed layout of a table's rows: columns packed by group, each group starting on a word boundary.
#[derive(Clone, Debug)]
pub struct Schema {
    columns: Vec<Column>,
    spans: Vec<WordSpan>,
    groups: Vec<Group>,
    row_words: usize,
    /// Declared without groups: the engine chooses them (laid out as one group to start).
    auto_groups: bool,
    /// Whether the columns lie in the row in column order (each column's offset above the one
    /// before), as they do unless the groups interleave the columns.
    in_column_order: bool,
}

impl Schema {
    /// Most column groups a schema may declare.
    pub const MAX_GROUPS: usize = 16;

    /// Starts a schema definition.
    pub fn builder() -> SchemaBuilder {
        SchemaBuilder::default()
    }

    /// Whether the schema was declared without column groups ([`SchemaBuilder::auto_column`]),
    /// leaving them to the engine: it starts as one group.
    pub fn auto_groups(&self) -> bool {
        self.auto_groups
    }

    /// Whether the columns lie in the row in column order: then the bytes of a set of columns
    /// taken group by group are the bytes taken in column order.
    pub fn in_column_order(&self) -> bool {
        self.in_column_order
    }

    /// Columns in declaration order.
    pub fn columns(&self) -> &[Column] {
        &self.columns
    }

    /// The column with id `c`.
    pub fn column(&self, c: ColumnId) -> &Column {
        &self.columns[c]
    }

    /// The row words column `c` occupies.
    #[inline]
    pub fn span(&self, c: ColumnId) -> &WordSpan {
        &self.spans[c]
    }

    /// Finds a column by name.
    pub fn column_id(&self, name: &str) -> Option<ColumnId> {
        self.columns.iter().position(|c| c.name == name)
    }

    /// Column groups in order.
    pub fn groups(&self) -> &[Group] {
        &self.groups
    }

    /// Size of a row image in 8-byte words.
    pub fn row_words(&self) -> usize {
        self.row_words
    }

    /// Bit mask of every column.
    pub fn all_columns(&self) -> u64 {
        if self.columns.len() == 64 {
            u64::MAX
        } else {
            (1u64 << self.columns.len()) - 1
        }
    }

    /// Bit mask of every group.
    pub fn all_groups(&self) -> u32 {
        (1u32 << self.groups.len()) - 1
    }

    /// Bit mask of the groups holding the columns in `columns`. Called several times per access, so
    /// the usual one- and two-group schemas (coarse and fine metadata) take a path without a loop.
    #[inline]
    pub fn groups_of(&self, columns: u64) -> u32 {
        let g = &self.groups;
        let bit = |i: usize| ((g[i].columns & columns != 0) as u32) << i;
        match g.len() {
            1 => bit(0),
            2 => bit(0) | bit(1),
            n => (0..n).fold(0, |mask, i| mask | bit(i)),
        }
    }

    /// The same columns in the groups `group_of[c]` gives each column `c` (groups numbered from 0
    /// without gaps): how a table's column groups are changed while it runs.
    pub fn regrouped(&self, group_of: &[usize]) -> Result<Schema, SchemaError> {
        if group_of.len() != self.columns.len() {
            return Err(SchemaError::GroupCount {
                got: group_of.len(),
                want: self.columns.len(),
            });
        }
        let mut b = Schema::builder();
        for (c, g) in self.columns.iter().zip(group_of) {
            b = b.column(&c.name, c.ty, *g);
        }
        b.build()
    }

    /// Whether `other` has the same columns (names and types) in the same order, whatever their
    /// groups.
    pub fn same_columns(&self, other: &Schema) -> bool {
        self.columns.len() == other.columns.len()
            && (self.columns.iter().zip(&other.columns))
                .all(|(a, b)| a.name == b.name && a.ty == b.ty)
    }

    /// Each column's group, by column id.
    pub fn group_of_columns(&self) -> Vec<usize> {
        self.columns.iter().map(|c| c.group).collect()
    }

    /// The same columns with every column in one group (coarse-grained metadata).
    pub fn coarse(&self) -> Schema {
        let mut b = Schema::builder();
        for c in &self.columns {
            b = b.column(&c.name, c.ty, 0);
        }
        b.build()
            .expect("a valid schema stays valid when its groups are merged")
    }
}

/// Declares a schema column by column; see [`Schema::builder`].
#[derive(Default)]
pub struct SchemaBuilder {
    columns: Vec<(String, ColumnType, Option<usize>)>,
}

impl SchemaBuilder {
    /// Adds a column in column group `group` (groups are numbered from 0 without gaps).
    pub fn column(mut self, name: &str, ty: ColumnType, group: usize) -> Self {
        self.columns.push((name.to_string(), ty, Some(group)));
        self
    }

    /// Adds a column without a group. A schema whose columns all come this way has automatic
    /// groups ([`Schema::auto_groups`]); one that mixes both ways is refused.
    pub fn auto_column(mut self, name: &str, ty: ColumnType) -> Self {
        self.columns.push((name.to_string(), ty, None));
        self
    }

    /// Lays the columns out: groups in order, columns of a group packed in declaration order.
    pub fn build(self) -> Result<Schema, SchemaError> {
        if self.columns.is_empty() {
            return Err(SchemaError::Empty);
        }
        if self.columns.len() > 64 {
            return Err(SchemaError::TooManyColumns(self.columns.len()));
        }
        let auto_groups = self.columns.iter().all(|c| c.2.is_none());
        if !auto_groups && let Some(c) = self.columns.iter().find(|c| c.2.is_none()) {
            return Err(SchemaError::MixedGroups(c.0.clone()));
        }
        let group_of = |c: &(String, ColumnType, Option<usize>)| c.2.unwrap_or(0);
        let n_groups = self.columns.iter().map(group_of).max().unwrap_or(0) + 1;
        if n_groups > Schema::MAX_GROUPS {
            return Err(SchemaError::TooManyGroups { got: n_groups });
        }
        for (i, (name, ty, _)) in self.columns.iter().enumerate() {
            if ty.width() == 0 {
                return Err(SchemaError::ZeroWidth(name.clone()));
            }
            if self.columns[..i].iter().any(|c| &c.0 == name) {
                return Err(SchemaError::DuplicateName(name.clone()));
            }
        }
        let mut columns: Vec<Column> = self
            .columns
            .iter()
            .map(|c| Column {
                name: c.0.clone(),
                ty: c.1,
                group: group_of(c),
                offset: 0,
            })
            .collect();
        let mut groups = Vec::with_capacity(n_groups);
        let mut word = 0;
        for g in 0..n_groups {
            let mut bytes = 0;
            let mut mask = 0u64;
            for (id, c) in columns.iter_mut().enumerate().filter(|(_, c)| c.group == g) {
                c.offset = word * 8 + bytes;
                bytes += c.ty.width();
                mask |= 1 << id;
            }
            if mask == 0 {
                return Err(SchemaError::EmptyGroup(g));
            }
            let words = bytes.div_ceil(8);
            groups.push(Group {
                word,
                words,
                columns: mask,
            });
            word += words;
        }
        Ok(Schema {
            spans: columns
                .iter()
                .map(|c| WordSpan::of(c.offset, c.ty.width()))
                .collect(),
            in_column_order: columns.windows(2).all(|p| p[0].offset < p[1].offset),
            columns,
            groups,
            row_words: word,
            auto_groups,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_declared_without_groups_make_one_automatic_group_and_mixing_is_refused() {
        let auto = Schema::builder()
            .auto_column("a", ColumnType::U64)
            .auto_column("b", ColumnType::I64)
            .build()
            .unwrap();
        assert!(auto.auto_groups());
        assert_eq!(auto.groups().len(), 1);
        assert_eq!(auto.group_of_columns(), vec![0, 0]);
        let declared = Schema::builder()
            .column("a", ColumnType::U64, 0)
            .column("b", ColumnType::I64, 1)
            .build()
            .unwrap();
        assert!(!declared.auto_groups());
        assert!(!auto.regrouped(&[0, 1]).unwrap().auto_groups());
        assert_eq!(
            Schema::builder()
                .column("a", ColumnType::U64, 0)
                .auto_column("b", ColumnType::U64)
                .build()
                .unwrap_err(),
            SchemaError::MixedGroups("b".into())
        );
    }

    #[test]
    fn groups_of_matches_the_groups_columns_for_any_group_count() {
        for n in 1..=5 {
            let mut b = Schema::builder();
            for c in 0..7 {
                b = b.column(&format!("c{c}"), ColumnType::U64, c % n);
            }
            let s = b.build().unwrap();
            assert_eq!(s.groups().len(), n);
            for cols in 0..1u64 << 7 {
                let want = (0..n)
                    .filter(|&g| (0..7).any(|c| c % n == g && cols & (1 << c) != 0))
                    .fold(0u32, |m, g| m | 1 << g);
                assert_eq!(s.groups_of(cols), want, "{n} groups, columns {cols:#b}");
            }
        }
    }

    #[test]
    fn groups_are_word_aligned_and_packed() {
        let s = Schema::builder()
            .column("a", ColumnType::Fixed(10), 0)
            .column("b", ColumnType::Fixed(10), 1)
            .column("c", ColumnType::Fixed(10), 0)
            .column("d", ColumnType::U64, 1)
            .build()
            .unwrap();
        assert_eq!(
            s.groups()[0],
            Group {
                word: 0,
                words: 3,
                columns: 0b0101
            }
        );
        assert_eq!(
            s.groups()[1],
            Group {
                word: 3,
                words: 3,
                columns: 0b1010
            }
        );
        assert_eq!(s.column(2).offset, 10);
        assert_eq!(s.column(1).offset, 24);
        assert_eq!(s.column(3).offset, 34);
        assert_eq!(s.row_words(), 6);
        assert_eq!(s.groups_of(0b0100), 0b01);
        assert_eq!(s.coarse().groups().len(), 1);
        assert_eq!(s.coarse().row_words(), 5);
    }

    #[test]
    fn bad_schemas_are_rejected() {
        assert_eq!(Schema::builder().build().unwrap_err(), SchemaError::Empty);
        let gap = Schema::builder().column("a", ColumnType::U64, 1).build();
        assert_eq!(gap.unwrap_err(), SchemaError::EmptyGroup(0));
        let dup = Schema::builder()
            .column("a", ColumnType::U64, 0)
            .column("a", ColumnType::U64, 0)
            .build();
        assert!(matches!(dup, Err(SchemaError::DuplicateName(_))));
        let zero = Schema::builder()
            .column("a", ColumnType::Fixed(0), 0)
            .build();
        assert!(matches!(zero, Err(SchemaError::ZeroWidth(_))));
        let s = Schema::builder()
            .column("a", ColumnType::U64, 0)
            .build()
            .unwrap();
        assert_eq!(
            s.regrouped(&[0, 1]).unwrap_err(),
            SchemaError::GroupCount { got: 2, want: 1 }
        );
    }

    #[test]
    fn a_regrouped_schema_keeps_its_columns_and_takes_the_new_groups() {
        let s = Schema::builder()
            .column("a", ColumnType::Fixed(10), 0)
            .column("b", ColumnType::U64, 0)
            .column("c", ColumnType::Bounded(5), 0)
            .build()
            .unwrap();
        let r = s.regrouped(&[1, 0, 1]).unwrap();
        assert!(r.same_columns(&s));
        assert_eq!(r.group_of_columns(), vec![1, 0, 1]);
        assert_eq!(r.groups()[0].columns, 0b010);
        assert_eq!(r.groups()[1].columns, 0b101);
        assert!(
            !r.same_columns(
                &Schema::builder()
                    .column("a", ColumnType::U64, 0)
                    .build()
                    .unwrap()
            )
        );
    }
}
