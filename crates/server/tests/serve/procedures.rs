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
    assert!(c.stats().unwrap().committed >= 70);
    assert!(matches!(
        c.call_procedure("tpcc.delivery", vec![]),
        Err(ClientError::Server {
            kind: ErrorKind::BadCall,
            ..
        })
    ));
}
