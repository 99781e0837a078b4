//! Walking a compiled rule's expression.

use cel::common::ast::{EntryExpr, Expr, IdedExpr, MapExpr, StructExpr};

/// The expressions directly inside `expr`, in source order (a map's keys and values alike).
pub fn children(expr: &IdedExpr) -> Vec<&IdedExpr> {
    match &expr.expr {
        Expr::Select(select) => vec![&select.operand],
        Expr::Call(call) => call.target.as_deref().into_iter().chain(&call.args).collect(),
        Expr::Comprehension(c) => vec![&c.iter_range, &c.accu_init, &c.loop_cond, &c.loop_step, &c.result],
        Expr::List(list) => list.elements.iter().collect(),
        Expr::Map(MapExpr { entries }) | Expr::Struct(StructExpr { entries, .. }) => entries
            .iter()
            .flat_map(|entry| match &entry.expr {
                EntryExpr::StructField(field) => vec![&field.value],
                EntryExpr::MapEntry(entry) => vec![&entry.key, &entry.value],
            })
            .collect(),
        Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => Vec::new(),
    }
}

/// How deep `expr` nests (a leaf is 1), found without recursing: the rule may nest deeper than a
/// stack allows.
pub fn depth(expr: &IdedExpr) -> usize {
    let (mut deepest, mut pending) = (0, vec![(expr, 1)]);
    while let Some((expr, depth)) = pending.pop() {
        deepest = deepest.max(depth);
        pending.extend(children(expr).into_iter().map(|child| (child, depth + 1)));
    }
    deepest
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_depth_of_an_expression_is_its_longest_chain() {
        let depth_of = |rule: &str| depth(cel::Env::stdlib().compile(rule).unwrap().expression());
        assert_eq!(depth_of("1"), 1);
        assert_eq!(depth_of("a.b.c"), 3);
        assert_eq!(depth_of("1 + 1 + 1 + 1"), 4);
        assert_eq!(depth_of("[1, 2, {'k': [3]}]"), 4);
        assert_eq!(depth_of("{'k': 1}.k"), 3);
    }
}
