//! The transactions about users: authentication (part of every page that needs a logged-in user),
//! RegisterUser, ViewUserInfo and AboutMe.

use phasedb_txn::{Protocol, Tx, TxResult, columns};

use super::input::Request;
use super::schema::*;
use super::{Scratch, missing};

/// Authenticates `user` by nickname and password, as RUBiS's pages that need a logged-in user do
/// (`SELECT id FROM users WHERE nickname=? AND password=?`); returns the user id.
pub fn authenticate<P: Protocol>(tx: &mut Tx<'_, '_, P>, t: &Tables, user: u64) -> TxResult<u64> {
    let (mut nickname, mut password) = ([0u8; 32], [0u8; 32]);
    let nick_len = format_into(&mut nickname, format_args!("user{user}"));
    let pass_len = format_into(&mut password, format_args!("password{user}"));
    let id = tx
        .get_columns(
            t.nicknames,
            nickname_key(&nickname[..nick_len]),
            columns(&[nicknames::USER]),
        )?
        .ok_or(missing("nickname"))?
        .u64(nicknames::USER);
    let row = tx
        .get_columns(t.users, id, columns(&[users::NICKNAME, users::PASSWORD]))?
        .ok_or(missing("user"))?;
    if row.bytes(users::NICKNAME) != &nickname[..nick_len]
        || row.bytes(users::PASSWORD) != &password[..pass_len]
    {
        return Err(missing("a user with that nickname and password"));
    }
    Ok(id)
}

/// Reads the nickname of `user` (how RUBiS pages name sellers, bidders and commenters).
pub fn nickname<P: Protocol>(tx: &mut Tx<'_, '_, P>, t: &Tables, user: u64) -> TxResult<()> {
    tx.get_columns(t.users, user, columns(&[users::NICKNAME]))?
        .ok_or(missing("user"))?;
    Ok(())
}

/// RegisterUser: checks the region and that the nickname is free, then inserts the user (and its
/// nickname into the index). A taken nickname rolls back as a user abort.
pub fn register_user<P: Protocol>(tx: &mut Tx<'_, '_, P>, t: &Tables, r: &Request) -> TxResult<()> {
    tx.get_columns(t.regions, r.region, columns(&[named::NAME]))?
        .ok_or(missing("region"))?;
    let id = r.new_id;
    let mut nick = [0u8; 32];
    let nick_len = format_into(&mut nick, format_args!("user{id}"));
    let nick = &nick[..nick_len];
    let key = nickname_key(nick);
    if tx
        .get_columns(t.nicknames, key, columns(&[nicknames::USER]))?
        .is_some()
    {
        return Err(tx.abort());
    }
    tx.insert(t.users, id, |w| fill_user(w, id, nick, r.region, r.date))?;
    tx.insert(t.nicknames, key, |w| w.set_u64(nicknames::USER, id))
}

/// Writes the columns of user `id` as RUBiS's population names them ("Great42 User42", nickname
/// "user42", password "password42"), with no rating or balance.
pub(super) fn fill_user(w: &mut impl UserWriter, id: u64, nickname: &[u8], region: u64, date: u64) {
    let mut buf = [0u8; 64];
    let n = format_into(&mut buf, format_args!("Great{id}"));
    w.bytes(users::FIRSTNAME, &buf[..n]);
    let n = format_into(&mut buf, format_args!("User{id}"));
    w.bytes(users::LASTNAME, &buf[..n]);
    w.bytes(users::NICKNAME, nickname);
    let n = format_into(&mut buf, format_args!("password{id}"));
    w.bytes(users::PASSWORD, &buf[..n]);
    let n = format_into(&mut buf, format_args!("Great{id}.User{id}@rubis.com"));
    w.bytes(users::EMAIL, &buf[..n]);
    w.uint(users::CREATION_DATE, date);
    w.uint(users::REGION, region);
}

/// The typed setters [`fill_user`] needs, so the loader and RegisterUser write the same row.
pub(super) trait UserWriter {
    fn bytes(&mut self, c: usize, v: &[u8]);
    fn uint(&mut self, c: usize, v: u64);
}

impl UserWriter for phasedb_txn::RowWriter<'_> {
    fn bytes(&mut self, c: usize, v: &[u8]) {
        self.set_bytes(c, v);
    }
    fn uint(&mut self, c: usize, v: u64) {
        self.set_u64(c, v);
    }
}

impl UserWriter for phasedb_storage::RowBuf<'_> {
    fn bytes(&mut self, c: usize, v: &[u8]) {
        self.set_bytes(c, v);
    }
    fn uint(&mut self, c: usize, v: u64) {
        self.set_u64(c, v);
    }
}

/// ViewUserInfo: the user's page, with the comments about them and their authors' nicknames.
/// Returns the number of comments shown.
pub fn view_user_info<P: Protocol>(
    tx: &mut Tx<'_, '_, P>,
    t: &Tables,
    r: &Request,
    s: &mut Scratch,
) -> TxResult<usize> {
    tx.get(t.users, r.to_user)?.ok_or(missing("user"))?;
    comments_about(tx, t, r.to_user, PAGE as usize, s)
}

/// Reads up to `limit` comments about `user` and their authors' nicknames; returns how many.
fn comments_about<P: Protocol>(
    tx: &mut Tx<'_, '_, P>,
    t: &Tables,
    user: u64,
    limit: usize,
    s: &mut Scratch,
) -> TxResult<usize> {
    s.ids.clear();
    let (lo, hi) = user_rows(user);
    let cols = columns(&[
        comments::FROM_USER,
        comments::RATING,
        comments::DATE,
        comments::COMMENT,
    ]);
    tx.scan(t.comments, lo, hi, limit, cols, |_, row| {
        s.ids.push(row.u64(comments::FROM_USER));
        true
    })?;
    for &from in &s.ids {
        nickname(tx, t, from)?;
    }
    Ok(s.ids.len())
}

/// AboutMe: after authentication, the user's information, the items they bid on (with the current
/// bid), the items they sell, the items they bought and the comments about them. Returns the number
/// of entries listed.
pub fn about_me<P: Protocol>(
    tx: &mut Tx<'_, '_, P>,
    t: &Tables,
    r: &Request,
    s: &mut Scratch,
) -> TxResult<usize> {
    let user = authenticate(tx, t, r.user)?;
    tx.get(t.users, user)?.ok_or(missing("user"))?;
    let mut listed = 0;
    let (lo, hi) = user_rows(user);
    for (index, col, cols) in [
        (
            t.bids_by_user,
            bids_by_user::ITEM,
            columns(&[items::NAME, items::END_DATE, items::MAX_BID]),
        ),
        (
            t.buy_now,
            buy_now::ITEM,
            columns(&[items::NAME, items::BUY_NOW]),
        ),
    ] {
        s.ids.clear();
        tx.scan(index, lo, hi, ABOUT_ME_LIST, columns(&[col]), |_, row| {
            s.ids.push(row.u64(col));
            true
        })?;
        for &item in &s.ids {
            tx.get_columns(t.items, item, cols)?
                .ok_or(missing("item"))?;
        }
        listed += s.ids.len();
    }
    s.ids.clear();
    let (lo, hi) = seller_items(user);
    let by_seller = columns(&[items_by_seller::ITEM]);
    tx.scan(
        t.items_by_seller,
        lo,
        hi,
        ABOUT_ME_LIST,
        by_seller,
        |_, row| {
            s.ids.push(row.u64(items_by_seller::ITEM));
            true
        },
    )?;
    let sold = columns(&[items::NAME, items::QUANTITY, items::MAX_BID]);
    for &item in &s.ids {
        tx.get_columns(t.items, item, sold)?
            .ok_or(missing("item"))?;
    }
    listed += s.ids.len();
    Ok(listed + comments_about(tx, t, user, ABOUT_ME_LIST, s)?)
}
