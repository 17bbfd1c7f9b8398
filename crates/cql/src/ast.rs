//! The CQL syntax tree the parser produces and the executor consumes.
//!
//! The tree is syntax only: names are resolved (unquoted names lowercased,
//! quoted names kept), literals keep their source text where a conversion
//! needs the target column type (integers, floats, durations), and nothing
//! is checked against a schema. Column types are already [`CqlType`]s.
//!
//! Bind markers (`?`, `:name`) appear in the tree as [`Term::Bind`] indexes
//! into [`Parsed::bind_markers`], numbered in order of appearance in the text.

use std::fmt;

use shoal_schema::arithmetic::NumericOp;
use shoal_schema::CqlType;

/// A parsed statement and the bind markers it contains.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parsed {
    pub statement: Statement,
    /// One entry per `?` or `:name`, in text order; a name used twice is
    /// one entry, one variable (ScyllaDB's reading; Cassandra counts two).
    pub bind_markers: Vec<BindMarker>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BindMarker {
    /// `Some` for `:name` markers (lowercased unless quoted), `None` for `?`.
    pub name: Option<String>,
}

/// `WITH` options in the order written; names are lowercased.
pub type Options = Vec<(String, OptionValue)>;

/// One statement. Variants wrap a struct per statement so the executor can
/// hand each kind to its own function.
// The statement is built once per query and moved, so boxing the larger
// variants would buy nothing but noise at every use site.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Statement {
    /// `USE ks`
    Use(String),
    CreateKeyspace(CreateKeyspace),
    AlterKeyspace(AlterKeyspace),
    DropKeyspace(DropKeyspace),
    CreateTable(CreateTable),
    AlterTable(AlterTable),
    DropTable(DropTable),
    CreateType(CreateType),
    AlterType(AlterType),
    DropType(DropType),
    CreateIndex(CreateIndex),
    DropIndex(DropIndex),
    CreateView(CreateView),
    AlterView(AlterView),
    DropView(DropView),
    CreateFunction(CreateFunction),
    CreateAggregate(CreateAggregate),
    /// `DROP FUNCTION|AGGREGATE`.
    DropFunction(DropFunction),
    Truncate(Truncate),
    Insert(Insert),
    InsertJson(InsertJson),
    Update(Update),
    Delete(Delete),
    Batch(Batch),
    Select(Select),
    Describe(Describe),
    /// Roles: `CREATE ROLE`, `GRANT role`, `LIST ROLES`, ...
    Role(crate::auth::statement::RoleStatement),
    /// `GRANT|REVOKE perm ON resource`, `LIST PERMISSIONS`.
    Permission(crate::auth::statement::PermissionStatement),
    /// ScyllaDB's `CREATE SERVICE LEVEL`, `ATTACH SERVICE LEVEL`, ...
    ServiceLevel(crate::auth::statement::ServiceLevelStatement),
}

/// `DESCRIBE ...` (or `DESC`), answered by the server as Cassandra 4+
/// does: names, or the CQL that recreates schema objects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Describe {
    pub target: DescribeTarget,
    /// `WITH INTERNALS`: table ids too, and for a SCHEMA the roles, role
    /// grants and permissions (ScyllaDB's).
    pub with_internals: bool,
    /// `WITH INTERNALS AND PASSWORDS`: the roles' salted hashes too (a
    /// superuser's request).
    pub with_passwords: bool,
}

/// What a DESCRIBE asks for. A `(keyspace, name)` pair names an object,
/// its keyspace defaulting to the session's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DescribeTarget {
    Keyspaces,
    Tables,
    Types,
    Functions,
    Aggregates,
    Cluster,
    /// `[FULL] SCHEMA`: FULL includes the system keyspaces.
    Schema {
        full: bool,
    },
    /// `[ONLY] KEYSPACE [name]`: ONLY leaves out what the keyspace holds.
    Keyspace {
        name: Option<String>,
        only: bool,
    },
    Table(Option<String>, String),
    Index(Option<String>, String),
    View(Option<String>, String),
    Type(Option<String>, String),
    Function(Option<String>, String),
    Aggregate(Option<String>, String),
    /// `DESCRIBE name`: a keyspace, else a table, an index or a view.
    Any(Option<String>, String),
}

/// A value on the right of `name = ...` in a `WITH` clause.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OptionValue {
    /// A quoted string, or an unquoted word (`NONE`), as written.
    String(String),
    /// A number as written, sign included (`1`, `0.01`, `-5`).
    Number(String),
    Bool(bool),
    /// `{'class': 'SimpleStrategy', 'replication_factor': 1}`: keys and values
    /// rendered to strings (numbers as written, booleans as `true`/`false`),
    /// in the order written.
    Map(Vec<(String, String)>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateKeyspace {
    pub name: String,
    pub if_not_exists: bool,
    pub options: Options,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlterKeyspace {
    pub name: String,
    pub options: Options,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DropKeyspace {
    pub name: String,
    pub if_exists: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnDef {
    pub name: String,
    pub ty: CqlType,
    pub is_static: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    Asc,
    Desc,
}

/// `CREATE TABLE`. The parser guarantees exactly one primary key was declared
/// (inline or as a clause), so `partition_key` is never empty; it does not
/// check that key columns are among `columns`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateTable {
    pub keyspace: Option<String>,
    pub name: String,
    pub if_not_exists: bool,
    pub columns: Vec<ColumnDef>,
    pub partition_key: Vec<String>,
    pub clustering_key: Vec<String>,
    /// From `WITH CLUSTERING ORDER BY (...)`, as written (may be partial).
    pub clustering_order: Vec<(String, Order)>,
    pub options: Options,
    pub compact_storage: bool,
    /// PRIMARY KEY was declared more than once: well-formed, but the
    /// executor refuses it (Invalid, as ScyllaDB).
    pub multiple_primary_keys: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlterTable {
    pub keyspace: Option<String>,
    pub name: String,
    pub op: AlterTableOp,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AlterTableOp {
    /// `ADD c t [STATIC]` or `ADD (c1 t1, c2 t2 STATIC)`.
    Add(Vec<ColumnDef>),
    /// `DROP c` or `DROP (c1, c2)`, `[USING TIMESTAMP t]`: the drop's
    /// time (µs); the processor stamps a drop without one with the clock
    /// of write timestamps, before the schema change runs. A bind marker
    /// for `t` (ScyllaDB's extension) is `timestamp_marker`, the value the
    /// processor puts into `timestamp` when it executes.
    Drop { columns: Vec<String>, timestamp: Option<i64>, timestamp_marker: Option<usize> },
    /// `RENAME a TO b [AND c TO d]`, as (from, to) pairs.
    Rename(Vec<(String, String)>),
    /// `WITH name = value AND ...`.
    With(Options),
    /// `ALTER c TYPE t`.
    AlterType { column: String, ty: CqlType },
}

/// `CREATE [CUSTOM] INDEX [IF NOT EXISTS] [name] ON [ks.]t (target)
/// [USING 'class' [WITH OPTIONS = {...}]]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateIndex {
    pub keyspace: Option<String>,
    pub table: String,
    pub name: Option<String>,
    pub if_not_exists: bool,
    pub target: IndexTarget,
    /// `CUSTOM ... USING 'class'`: the class.
    pub custom_class: Option<String>,
    /// ScyllaDB's `WITH` options of the table holding the index (a global
    /// index's: `ID`, `comment`, `gc_grace_seconds`, ...).
    pub options: Options,
    /// The id of the table holding the index: set only by the schema
    /// file's loader (the index keeps its data across restarts); a client's
    /// statement gets a fresh one.
    pub view_id: Option<uuid::Uuid>,
}

/// What an index covers: `v`, `keys(m)`, `values(m)`, `entries(m)`,
/// `full(l)`, or a local index's `(p1, p2), v`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexTarget {
    pub column: String,
    pub kind: shoal_schema::IndexKind,
    /// The kind was written out (`values(l)`), not implied by a bare
    /// column: only a collection's index may name it.
    pub kind_named: bool,
    /// A local index's partition key columns.
    pub local_key: Option<Vec<String>>,
}

/// `DROP INDEX [IF EXISTS] [ks.]name`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DropIndex {
    pub keyspace: Option<String>,
    pub name: String,
    pub if_exists: bool,
}

/// `CREATE MATERIALIZED VIEW [IF NOT EXISTS] [ks.]v AS SELECT ... FROM
/// [ks.]t WHERE ... PRIMARY KEY (...) [WITH ...]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateView {
    pub keyspace: Option<String>,
    pub name: String,
    pub if_not_exists: bool,
    pub base_keyspace: Option<String>,
    pub base: String,
    /// The selected columns as written; empty for `SELECT *`.
    pub selectors: Vec<Selector>,
    pub where_clause: Vec<Relation>,
    pub partition_key: Vec<String>,
    pub clustering_key: Vec<String>,
    /// From `WITH CLUSTERING ORDER BY (...)`, as written.
    pub clustering_order: Vec<(String, Order)>,
    pub options: Options,
    /// `WITH COMPACT STORAGE`: parsed so it can be refused with
    /// Cassandra's text rather than a syntax error.
    pub compact_storage: bool,
    /// The view table's id and column ids: set only by the schema file's
    /// loader (the view keeps its data across restarts).
    pub view_id: Option<uuid::Uuid>,
}

/// `ALTER MATERIALIZED VIEW [ks.]v WITH options`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlterView {
    pub keyspace: Option<String>,
    pub name: String,
    pub options: Options,
}

/// `DROP MATERIALIZED VIEW [IF EXISTS] [ks.]v`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DropView {
    pub keyspace: Option<String>,
    pub name: String,
    pub if_exists: bool,
}

/// `DROP FUNCTION|AGGREGATE [IF EXISTS] [ks.]name [(type, ...)]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DropFunction {
    pub keyspace: Option<String>,
    pub name: String,
    /// The argument types, when given (they pick one overload).
    pub args: Option<Vec<CqlType>>,
    pub if_exists: bool,
    /// `DROP AGGREGATE`.
    pub aggregate: bool,
}

/// `CREATE [OR REPLACE] FUNCTION [IF NOT EXISTS] [ks.]name(arg type, ...)
/// (CALLED | RETURNS NULL) ON NULL INPUT RETURNS type LANGUAGE lang AS 'body'`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateFunction {
    pub keyspace: Option<String>,
    pub name: String,
    pub or_replace: bool,
    pub if_not_exists: bool,
    pub args: Vec<(String, CqlType)>,
    pub called_on_null_input: bool,
    pub return_type: CqlType,
    pub language: String,
    pub body: String,
}

/// `CREATE [OR REPLACE] AGGREGATE [IF NOT EXISTS] [ks.]name(type, ...)
/// SFUNC f STYPE type [REDUCEFUNC r] [FINALFUNC g] [INITCOND term]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateAggregate {
    pub keyspace: Option<String>,
    pub name: String,
    pub or_replace: bool,
    pub if_not_exists: bool,
    pub arg_types: Vec<CqlType>,
    pub state_func: String,
    pub state_type: CqlType,
    pub reduce_func: Option<String>,
    pub final_func: Option<String>,
    pub initcond: Option<Term>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DropTable {
    pub keyspace: Option<String>,
    pub name: String,
    pub if_exists: bool,
}

/// `CREATE TYPE [IF NOT EXISTS] ks.t (field type, ...)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateType {
    pub keyspace: Option<String>,
    pub name: String,
    pub if_not_exists: bool,
    pub fields: Vec<(String, CqlType)>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlterType {
    pub keyspace: Option<String>,
    pub name: String,
    pub op: AlterTypeOp,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AlterTypeOp {
    /// `ADD f t`.
    Add(String, CqlType),
    /// `RENAME a TO b [AND c TO d]`, as (from, to) pairs.
    Rename(Vec<(String, String)>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DropType {
    pub keyspace: Option<String>,
    pub name: String,
    pub if_exists: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Truncate {
    pub keyspace: Option<String>,
    pub name: String,
    /// `USING TIMEOUT` (the only USING option TRUNCATE takes).
    pub timeout: Option<Term>,
}

/// `USING TTL .. AND TIMESTAMP .. AND TIMEOUT ..`, each at most once. The
/// parser only admits the options the statement kind allows (DELETE and
/// BATCH: no TTL; SELECT: TIMEOUT only).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Using {
    pub ttl: Option<Term>,
    pub timestamp: Option<Term>,
    pub timeout: Option<Term>,
}

/// `INSERT INTO t (cols) VALUES (terms)`; `columns` and `values` have the
/// same length (the parser checks).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Insert {
    pub keyspace: Option<String>,
    pub table: String,
    pub columns: Vec<String>,
    pub values: Vec<Term>,
    pub if_not_exists: bool,
    pub using: Using,
}

/// `INSERT INTO t JSON '...' [DEFAULT NULL|UNSET]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InsertJson {
    pub keyspace: Option<String>,
    pub table: String,
    /// A string literal or a bind marker.
    pub json: Term,
    /// `DEFAULT UNSET`: columns missing from the JSON are left alone instead
    /// of being set to null (the default, `DEFAULT NULL`).
    pub default_unset: bool,
    pub if_not_exists: bool,
    pub using: Using,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Update {
    pub keyspace: Option<String>,
    pub table: String,
    pub using: Using,
    pub assignments: Vec<Assignment>,
    pub where_clause: Vec<Relation>,
    pub condition: Condition,
}

/// One `SET` item of an UPDATE.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Assignment {
    /// `c = term`
    Set { column: String, value: Term },
    /// `c = c + term` or `c += term`: counter increment, collection append
    /// or union.
    Add { column: String, value: Term },
    /// `c = term + c`: list prepend.
    Prepend { column: String, value: Term },
    /// `c = c - term` or `c -= term`: counter decrement or element removal.
    Subtract { column: String, value: Term },
    /// `c[key] = term`: list index or map key.
    SetElement { column: String, key: Term, value: Term },
    /// `c.field = term`: one field of a non-frozen user type.
    SetField { column: String, field: String, value: Term },
}

/// A column, one element of a collection column (`c[term]`), or one field
/// of a user type column (`c.field`); never both.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnTarget {
    pub column: String,
    pub element: Option<Term>,
    pub field: Option<String>,
}

/// The `IF` clause of an UPDATE or DELETE (INSERT's `IF NOT EXISTS` is a flag).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Condition {
    #[default]
    None,
    IfExists,
    IfColumns(Vec<ColumnCondition>),
}

/// `IF c op term`. For [`Operator::In`] and [`Operator::NotIn`] the value is
/// a [`Term::List`] of the candidates, or a [`Term::Bind`] for `IN ?`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnCondition {
    pub target: ColumnTarget,
    pub op: Operator,
    pub value: Term,
}

/// `DELETE [targets] FROM t ...`; no targets means the whole row(s).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delete {
    pub keyspace: Option<String>,
    pub table: String,
    pub columns: Vec<ColumnTarget>,
    pub using: Using,
    pub where_clause: Vec<Relation>,
    pub condition: Condition,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchKind {
    Logged,
    Unlogged,
    Counter,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Batch {
    pub kind: BatchKind,
    pub using: Using,
    /// Only `Insert`, `InsertJson`, `Update` and `Delete`; may be empty.
    pub statements: Vec<Statement>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Select {
    pub keyspace: Option<String>,
    pub table: String,
    pub distinct: bool,
    pub json: bool,
    pub selection: Selection,
    pub where_clause: Vec<Relation>,
    pub group_by: Vec<String>,
    pub order_by: Vec<(String, Order)>,
    pub per_partition_limit: Option<Term>,
    pub limit: Option<Term>,
    pub allow_filtering: bool,
    pub bypass_cache: bool,
    /// `USING TIMEOUT`, written after the table name or at the very end.
    pub timeout: Option<Term>,
    /// ScyllaDB's SELECT without FROM: `table` is then `system.one_row`.
    pub without_from: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selection {
    /// `*`
    Wildcard,
    Selectors(Vec<Selector>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selector {
    pub expr: SelectorExpr,
    /// `AS alias`.
    pub alias: Option<String>,
}

/// One selected expression. Its `Display` is the result column name Cassandra
/// gives it when there is no alias (`writetime(v)`, `count`, `system.now()`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SelectorExpr {
    Column(String),
    /// `COUNT(*)` or `COUNT(1)`.
    CountStar,
    /// `WRITETIME(c)`
    WriteTime(String),
    /// `TTL(c)`
    Ttl(String),
    /// `WRITETIME(c.field)`, `TTL(c[key])`: of one field of a user type or
    /// one element of a collection; `part` is the `Field` or `Element`
    /// (or `Slice`, which is refused) of column `c`.
    WriteTimeOfPart {
        ttl: bool,
        part: Box<SelectorExpr>,
    },
    /// `f(args)`, including `token(a, b)`, `count(c)`, `min(c)`, `now()`.
    /// The name is lowercased unless quoted; `ks.f` is kept joined.
    FunctionCall {
        name: String,
        args: Vec<SelectorExpr>,
    },
    /// `CAST(expr AS type)`
    Cast {
        expr: Box<SelectorExpr>,
        ty: CqlType,
    },
    /// A constant or bind marker (`'a'`, `1`, `?`).
    Term(Term),
    /// `expr.field` of a user type value.
    Field {
        expr: Box<SelectorExpr>,
        field: String,
    },
    /// `left op right` of numbers (`a + b`, `v * 2`).
    Arithmetic {
        op: NumericOp,
        left: Box<SelectorExpr>,
        right: Box<SelectorExpr>,
    },
    /// `-x` of anything but a number literal: computed as `0 - x`, named
    /// `-x` (Cassandra's column name).
    Negation(Box<SelectorExpr>),
    /// `expr[key]`: a map's value, a set's element, a list's element.
    Element {
        expr: Box<SelectorExpr>,
        key: Term,
    },
    /// `expr[from..to]` of a map or set: the part between the bounds,
    /// both included; either may be left out.
    Slice {
        expr: Box<SelectorExpr>,
        from: Option<Term>,
        to: Option<Term>,
    },
}

/// One `WHERE` restriction; restrictions are joined by `AND`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Relation {
    /// `c op term`, op anything but `In`.
    Simple { column: String, op: Operator, value: Term },
    /// `c IN (t1, t2)` or `c IN ?`.
    In { column: String, values: InValues },
    /// `c NOT IN (t1, t2)` or `c NOT IN ?`: always a filter.
    NotIn { column: String, values: InValues },
    /// `(c1, c2) op (t1, t2)` or `(c1, c2) op ?`; op is a comparison.
    MultiColumn { columns: Vec<String>, op: Operator, value: Term },
    /// `(c1, c2) IN ((t1, t2), (t3, t4))` or `(c1, c2) IN ?`.
    MultiColumnIn { columns: Vec<String>, values: InValues },
    /// `token(a, b) op term`; op is a comparison.
    Token { columns: Vec<String>, op: Operator, value: Term },
    /// `c IS NOT NULL` (materialized-view syntax, accepted for completeness).
    IsNotNull { column: String },
    /// `m[key] op term` or `l[index] op term`: a map's entry or a list's
    /// element (a filter).
    Element { column: String, key: Term, op: Operator, value: Term },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InValues {
    /// The parenthesized list, possibly empty; elements may be bind markers.
    Terms(Vec<Term>),
    /// `IN ?`: one marker bound to the whole list.
    Bind(usize),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operator {
    Eq,
    Lt,
    Le,
    Gt,
    Ge,
    Ne,
    In,
    /// `NOT IN`, in an `IF` condition (a WHERE clause's is
    /// [`Relation::NotIn`]).
    NotIn,
    Contains,
    ContainsKey,
    Like,
}

impl Operator {
    /// The operator as CQL writes it.
    pub fn text(self) -> &'static str {
        match self {
            Operator::Eq => "=",
            Operator::Ne => "!=",
            Operator::Lt => "<",
            Operator::Le => "<=",
            Operator::Gt => ">",
            Operator::Ge => ">=",
            Operator::In => "IN",
            Operator::NotIn => "NOT IN",
            Operator::Contains => "CONTAINS",
            Operator::ContainsKey => "CONTAINS KEY",
            Operator::Like => "LIKE",
        }
    }
}

/// A value expression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Term {
    Literal(Literal),
    /// Index into [`Parsed::bind_markers`].
    Bind(usize),
    /// `[a, b]`
    List(Vec<Term>),
    /// `{a, b}` (at least one element).
    Set(Vec<Term>),
    /// `{k: v, ...}` (at least one entry).
    Map(Vec<(Term, Term)>),
    /// `{}`: an empty map or an empty set; only the target type can tell.
    EmptyBraces,
    /// `(a, b)`; also a 1-tuple `(a)`.
    Tuple(Vec<Term>),
    /// `{field: term, ...}`: a user type value, fields as written.
    UserType(Vec<(String, Term)>),
    /// `now()`, `toTimestamp(now())`, `system.now()`; name lowercased unless
    /// quoted, keyspace-qualified names joined with `.`.
    FunctionCall {
        name: String,
        args: Vec<Term>,
    },
    /// `(type) term`
    Cast {
        ty: CqlType,
        term: Box<Term>,
    },
    /// `CAST(term AS type)`: the term's value converted to `ty` as
    /// Cassandra's `castAs` functions convert it (`term_casts`).
    CastAs {
        term: Box<Term>,
        ty: CqlType,
    },
    /// A column name where a value is expected (`VALUES (k, a)`): parsed,
    /// as ScyllaDB's grammar does, and refused when evaluated.
    Column(String),
    /// `left op right` of numbers (`c = 1 + 2`, Cassandra 4's), computed
    /// in the operand types `term_operations` chooses for the receiver.
    Operation {
        op: NumericOp,
        left: Box<Term>,
        right: Box<Term>,
    },
    /// `-term` of anything but a number literal (`-(1 + 2)`, `-?`).
    Negation(Box<Term>),
}

/// A constant. Numbers and durations keep their text (sign included) because
/// their meaning depends on the column type they are bound to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Literal {
    String(String),
    /// Arbitrary-length integer text, e.g. `-9223372036854775808`.
    Integer(String),
    /// Decimal/exponent text, or `NaN`, `Infinity`, `-Infinity`.
    Float(String),
    Boolean(bool),
    Null,
    /// An unquoted UUID as written.
    Uuid(String),
    /// A `0x...` literal, decoded.
    Blob(Vec<u8>),
    /// As written: `1h30m`, `-5s`, `P1DT2H`.
    Duration(String),
}

impl fmt::Display for Order {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Order::Asc => "ASC",
            Order::Desc => "DESC",
        })
    }
}

fn write_list<T: fmt::Display>(f: &mut fmt::Formatter<'_>, items: &[T]) -> fmt::Result {
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            f.write_str(", ")?;
        }
        write!(f, "{item}")?;
    }
    Ok(())
}

/// Renders CQL text that parses back to the same literal.
impl fmt::Display for Literal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Literal::String(s) => write!(f, "'{}'", s.replace('\'', "''")),
            Literal::Integer(s) | Literal::Float(s) | Literal::Uuid(s) | Literal::Duration(s) => f.write_str(s),
            Literal::Boolean(b) => write!(f, "{b}"),
            Literal::Null => f.write_str("null"),
            Literal::Blob(bytes) => {
                f.write_str("0x")?;
                bytes.iter().try_for_each(|b| write!(f, "{b:02x}"))
            }
        }
    }
}

impl Term {
    /// Whether a bind marker stands anywhere in the term.
    pub fn has_bind_marker(&self) -> bool {
        self.any(&|t| matches!(t, Term::Bind(_)))
    }

    /// Gives `f` the name of every function the term calls.
    pub fn function_names_mut(&mut self, f: &mut dyn FnMut(&mut String)) {
        match self {
            Term::FunctionCall { name, args } => {
                f(name);
                args.iter_mut().for_each(|t| t.function_names_mut(f));
            }
            Term::Cast { term, .. } | Term::CastAs { term, .. } | Term::Negation(term) => term.function_names_mut(f),
            Term::Operation { left, right, .. } => {
                left.function_names_mut(f);
                right.function_names_mut(f);
            }
            Term::List(items) | Term::Set(items) | Term::Tuple(items) => {
                items.iter_mut().for_each(|t| t.function_names_mut(f));
            }
            Term::Map(entries) => entries.iter_mut().for_each(|(k, v)| {
                k.function_names_mut(f);
                v.function_names_mut(f);
            }),
            Term::UserType(fields) => fields.iter_mut().for_each(|(_, v)| v.function_names_mut(f)),
            Term::Literal(_) | Term::Bind(_) | Term::EmptyBraces | Term::Column(_) => {}
        }
    }

    /// Whether `found` holds for the term or any term inside it.
    pub fn any(&self, found: &impl Fn(&Term) -> bool) -> bool {
        if found(self) {
            return true;
        }
        match self {
            Term::Cast { term, .. } | Term::CastAs { term, .. } | Term::Negation(term) => term.any(found),
            Term::Operation { left, right, .. } => left.any(found) || right.any(found),
            Term::List(items) | Term::Set(items) | Term::Tuple(items) | Term::FunctionCall { args: items, .. } => {
                items.iter().any(|t| t.any(found))
            }
            Term::Map(entries) => entries.iter().any(|(k, v)| k.any(found) || v.any(found)),
            Term::UserType(fields) => fields.iter().any(|(_, v)| v.any(found)),
            Term::Literal(_) | Term::Bind(_) | Term::EmptyBraces | Term::Column(_) => false,
        }
    }
}

/// `left op right` as text from its operands' texts, each with its
/// operator if it is an operation (see [`write_operation`]): a selection's
/// column name.
pub(crate) fn operation_text(
    op: NumericOp,
    left: (&str, Option<NumericOp>),
    right: (&str, Option<NumericOp>),
) -> String {
    struct Text<'a>(NumericOp, (&'a str, Option<NumericOp>), (&'a str, Option<NumericOp>));
    impl fmt::Display for Text<'_> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write_operation(f, self.0, (&self.1 .0, self.1 .1), (&self.2 .0, self.2 .1))
        }
    }
    Text(op, left, right).to_string()
}

/// `left op right`, a side that is itself an operation (`Some` of its
/// operator) in parentheses where it binds looser than its place allows,
/// so the text parses back as the same tree: `(1 + 2) * 3`, `1 - (2 - 3)`.
fn write_operation(
    f: &mut fmt::Formatter<'_>,
    op: NumericOp,
    (left, left_op): (&dyn fmt::Display, Option<NumericOp>),
    (right, right_op): (&dyn fmt::Display, Option<NumericOp>),
) -> fmt::Result {
    let binding = |op: NumericOp| u8::from(!matches!(op, NumericOp::Add | NumericOp::Sub));
    let looser = |side: Option<NumericOp>, than: u8| side.is_some_and(|op| binding(op) < than);
    if looser(left_op, binding(op)) {
        write!(f, "({left})")?;
    } else {
        write!(f, "{left}")?;
    }
    write!(f, " {} ", op.symbol())?;
    if looser(right_op, binding(op) + 1) {
        write!(f, "({right})")
    } else {
        write!(f, "{right}")
    }
}

/// Renders CQL text; bind markers print as `?`.
impl fmt::Display for Term {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Term::Literal(lit) => write!(f, "{lit}"),
            Term::Bind(_) => f.write_str("?"),
            Term::List(items) => {
                f.write_str("[")?;
                write_list(f, items)?;
                f.write_str("]")
            }
            Term::Set(items) => {
                f.write_str("{")?;
                write_list(f, items)?;
                f.write_str("}")
            }
            Term::Map(entries) => {
                f.write_str("{")?;
                for (i, (k, v)) in entries.iter().enumerate() {
                    let sep = if i > 0 { ", " } else { "" };
                    write!(f, "{sep}{k}: {v}")?;
                }
                f.write_str("}")
            }
            Term::EmptyBraces => f.write_str("{}"),
            Term::UserType(fields) => {
                f.write_str("{")?;
                for (i, (name, v)) in fields.iter().enumerate() {
                    let sep = if i > 0 { ", " } else { "" };
                    write!(f, "{sep}{name}: {v}")?;
                }
                f.write_str("}")
            }
            Term::Tuple(items) => {
                f.write_str("(")?;
                write_list(f, items)?;
                f.write_str(")")
            }
            Term::FunctionCall { name, args } => {
                write!(f, "{name}(")?;
                write_list(f, args)?;
                f.write_str(")")
            }
            Term::Cast { ty, term } => write!(f, "({ty}){term}"),
            Term::CastAs { term, ty } => write!(f, "CAST({term} AS {ty})"),
            Term::Column(name) => f.write_str(name),
            Term::Operation { op, left, right } => {
                let binding = |term: &Term| match term {
                    Term::Operation { op, .. } => Some(*op),
                    _ => None,
                };
                write_operation(f, *op, (left, binding(left)), (right, binding(right)))
            }
            Term::Negation(term) if matches!(**term, Term::Operation { .. }) => write!(f, "-({term})"),
            Term::Negation(term) => write!(f, "-{term}"),
        }
    }
}

impl SelectorExpr {
    /// Gives `f` the name of every function the selector calls, in its
    /// terms too.
    pub fn function_names_mut(&mut self, f: &mut dyn FnMut(&mut String)) {
        match self {
            SelectorExpr::FunctionCall { name, args } => {
                f(name);
                args.iter_mut().for_each(|a| a.function_names_mut(f));
            }
            SelectorExpr::Term(term) => term.function_names_mut(f),
            SelectorExpr::Element { expr, key } => {
                expr.function_names_mut(f);
                key.function_names_mut(f);
            }
            SelectorExpr::Slice { expr, from, to } => {
                expr.function_names_mut(f);
                from.iter_mut().chain(to.iter_mut()).for_each(|t| t.function_names_mut(f));
            }
            SelectorExpr::Arithmetic { left, right, .. } => {
                left.function_names_mut(f);
                right.function_names_mut(f);
            }
            SelectorExpr::WriteTimeOfPart { part: expr, .. }
            | SelectorExpr::Cast { expr, .. }
            | SelectorExpr::Field { expr, .. }
            | SelectorExpr::Negation(expr) => expr.function_names_mut(f),
            SelectorExpr::Column(_) | SelectorExpr::CountStar | SelectorExpr::WriteTime(_) | SelectorExpr::Ttl(_) => {}
        }
    }
}

impl fmt::Display for SelectorExpr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SelectorExpr::Column(name) => f.write_str(name),
            SelectorExpr::CountStar => f.write_str("count"),
            SelectorExpr::WriteTime(c) => write!(f, "writetime({c})"),
            SelectorExpr::Ttl(c) => write!(f, "ttl({c})"),
            SelectorExpr::WriteTimeOfPart { ttl, part } => {
                write!(f, "{}({part})", if *ttl { "ttl" } else { "writetime" })
            }
            SelectorExpr::FunctionCall { name, args } => {
                write!(f, "{name}(")?;
                write_list(f, args)?;
                f.write_str(")")
            }
            SelectorExpr::Cast { expr, ty } => write!(f, "cast({expr} as {ty})"),
            SelectorExpr::Term(term) => write!(f, "{term}"),
            SelectorExpr::Field { expr, field } => write!(f, "{expr}.{field}"),
            SelectorExpr::Element { expr, key } => write!(f, "{expr}[{key}]"),
            SelectorExpr::Arithmetic { op, left, right } => {
                let binding = |expr: &SelectorExpr| match expr {
                    SelectorExpr::Arithmetic { op, .. } => Some(*op),
                    _ => None,
                };
                write_operation(f, *op, (left, binding(left)), (right, binding(right)))
            }
            SelectorExpr::Negation(expr) if matches!(**expr, SelectorExpr::Arithmetic { .. }) => write!(f, "-({expr})"),
            SelectorExpr::Negation(expr) => write!(f, "-{expr}"),
            SelectorExpr::Slice { expr, from, to } => {
                let bound = |b: &Option<Term>| b.as_ref().map(Term::to_string).unwrap_or_default();
                write!(f, "{expr}[{}..{}]", bound(from), bound(to))
            }
        }
    }
}
