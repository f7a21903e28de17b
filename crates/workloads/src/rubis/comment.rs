//! The comment transactions: PutComment (the comment form) and StoreComment, which Doppel's port
//! rewrites to raise the rating of the user commented on with Add instead of reading it.

use phasedb_txn::{Protocol, Tx, TxResult, columns};

use super::input::Request;
use super::missing;
use super::schema::*;
use super::user::{authenticate, nickname};

/// Ratings a RUBiS comment form offers.
pub const RATINGS: [i64; 5] = [5, 3, 0, -3, -5];
/// The text of generated comments.
pub const COMMENT_TEXT: &[u8] = b"RUBiS automatically generated comment";

/// PutComment: after authentication, the item's name and the nickname of the user to comment on.
pub fn put_comment<P: Protocol>(tx: &mut Tx<'_, '_, P>, t: &Tables, r: &Request) -> TxResult<()> {
    authenticate(tx, t, r.user)?;
    tx.get_columns(t.items, r.item, columns(&[items::NAME]))?
        .ok_or(missing("item"))?;
    nickname(tx, t, r.to_user)
}

/// StoreComment: inserts the comment and adds its rating to the rating of the user commented on.
pub fn store_comment<P: Protocol>(tx: &mut Tx<'_, '_, P>, t: &Tables, r: &Request) -> TxResult<()> {
    tx.insert(t.comments, user_row_key(r.to_user, r.new_id), |w| {
        w.set_u64(comments::FROM_USER, r.user);
        w.set_u64(comments::ITEM, r.item);
        w.set_i64(comments::RATING, r.rating);
        w.set_u64(comments::DATE, r.date);
        w.set_bytes(comments::COMMENT, COMMENT_TEXT);
    })?;
    if !tx.add(t.users, r.to_user, users::RATING, r.rating)? {
        return Err(missing("user"));
    }
    Ok(())
}
