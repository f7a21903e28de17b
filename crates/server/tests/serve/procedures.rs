use phasedb_client::{ClientError, ErrorKind, Value};

use crate::{connect, server};

#[test]
fn stored_procedures_run_ycsb_and_tpcc_by_name() {
    let s = server("occ", None);
    let mut c = connect(&s);
    let first = c
        .call_procedure(
            "ycsb.setup",
            vec![Value::U64(1000), Value::U64(10), Value::U64(10)],
        )
        .unwrap();
    assert_eq!(first, vec![Value::U64(0)]);
    assert_eq!(c.describe_table("usertable").unwrap().def.columns.len(), 10);
    let args = |k: u64| {
        vec![
            Value::U64(k),
            Value::U64(1),
            Value::U64(k + 1),
            Value::U64(0),
            Value::U64(k + 2),
            Value::U64(1),
            Value::U64(k + 3),
            Value::U64(0),
            Value::U64(17),
        ]
    };
    for k in 0..50 {
        c.call_procedure("ycsb", args(k * 4)).unwrap();
    }
    assert!(matches!(
        c.call_procedure("ycsb", args(999)),
        Err(ClientError::Server {
            kind: ErrorKind::BadCall,
            ..
        })
    ));
    c.call_procedure("tpcc.setup", vec![Value::U64(1)]).unwrap();
    // usertable and TPC-C's nine tables with their two index tables.
    assert_eq!(c.list_tables().unwrap().len(), 12);
    let mut committed = 0;
    for _ in 0..20 {
        c.call_procedure("tpcc.payment", vec![Value::U64(1)])
            .unwrap();
        // 1% of NewOrders roll back by the specification (an unused item).
        match c.call_procedure("tpcc.new_order", vec![Value::U64(1)]) {
            Ok(_) => committed += 1,
            Err(ClientError::Aborted {
                cause: phasedb_client::AbortCause::UserAbort,
                ..
            }) => {}
            Err(e) => panic!("{e}"),
        }
    }
    assert!(committed > 0);
    // Every committed call is counted: 50 YCSB, 20 Payments and the NewOrders.
    assert_eq!(c.stats().unwrap().committed, 70 + committed);
    assert!(matches!(
        c.call_procedure("tpcc.delivery", vec![]),
        Err(ClientError::Server {
            kind: ErrorKind::BadCall,
            ..
        })
    ));
}

fn bad_call(r: Result<Vec<Value>, ClientError>) -> bool {
    matches!(
        r,
        Err(ClientError::Server {
            kind: ErrorKind::BadCall,
            ..
        })
    )
}

/// Order-Status, Delivery and Stock-Level by name, checked against what TPC-C's load leaves
/// (clause 4.3.3.1: one order per customer, orders 2101..=3000 of every district undelivered,
/// balances of -10.00) and what the deliveries did.
#[test]
fn tpcc_order_status_delivery_and_stock_level_run_by_name() {
    use Value::{I64, U64};
    let s = server("occ", None);
    let mut c = connect(&s);
    assert!(bad_call(c.call_procedure("tpcc.delivery", vec![U64(1)])));
    c.call_procedure("tpcc.setup", vec![U64(1)]).unwrap();
    for bad in [
        ("tpcc.delivery", vec![U64(2)]),
        ("tpcc.delivery", vec![U64(1), U64(11)]),
        ("tpcc.order_status", vec![U64(1), U64(11), U64(1)]),
        ("tpcc.order_status", vec![U64(1), U64(1)]),
        ("tpcc.stock_level", vec![U64(1), U64(1), U64(10), U64(0)]),
        ("tpcc.stock_level", vec![]),
    ] {
        assert!(bad_call(c.call_procedure(bad.0, bad.1.clone())), "{bad:?}");
    }
    assert_eq!(
        c.call_procedure("tpcc.delivery", vec![U64(1), U64(7)])
            .unwrap(),
        vec![U64(2101); 10]
    );
    assert_eq!(
        c.call_procedure("tpcc.delivery", vec![U64(1)]).unwrap(),
        vec![U64(2102); 10]
    );
    // District 1's customers: each placed exactly one order, the two delivered ones billed.
    let mut orders = Vec::new();
    for customer in 1..=3000u64 {
        let v = c
            .call_procedure("tpcc.order_status", vec![U64(1), U64(1), U64(customer)])
            .unwrap();
        let [
            U64(c_id),
            I64(balance),
            U64(o_id),
            U64(carrier),
            U64(lines),
            I64(amount),
        ] = v[..]
        else {
            panic!("order status returned {v:?}");
        };
        assert_eq!(c_id, customer);
        assert!((5..=15).contains(&lines), "{v:?}");
        match o_id {
            2101 => assert_eq!((carrier, balance), (7, -1000 + amount)),
            2102 => assert!((1..=10).contains(&carrier) && balance == -1000 + amount),
            o if o < 2101 => assert!((1..=10).contains(&carrier) && balance == -1000),
            _ => assert!(carrier == 0 && balance == -1000, "{v:?}"),
        }
        orders.push(o_id);
    }
    orders.sort_unstable();
    assert_eq!(orders, (1..=3000).collect::<Vec<_>>());
    // Stock quantities are loaded in 10..=100: none is below 0, every item is below 101.
    let low = |c: &mut phasedb_client::Client, threshold| match c
        .call_procedure("tpcc.stock_level", vec![U64(1), U64(1), U64(threshold)])
        .unwrap()[..]
    {
        [U64(n)] => n,
        ref v => panic!("stock level returned {v:?}"),
    };
    let all = low(&mut c, 101);
    assert!(
        (5..=300).contains(&all),
        "{all} distinct items in 20 orders"
    );
    assert_eq!(low(&mut c, 0), 0);
    assert!(low(&mut c, 50) <= all);
    assert_eq!(
        c.call_procedure("tpcc.stock_level", vec![U64(1)])
            .unwrap()
            .len(),
        1
    );
}
