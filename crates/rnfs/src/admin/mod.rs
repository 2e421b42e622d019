//! The admin socket: a Unix stream socket on which a running `rnfs serve`
//! answers one JSON request per line with one JSON response per line
//! ([`protocol`]). The server side is [`socket`] (transport) and [`control`]
//! (what each command does to the live server); `rnfs stats` and `rnfs admin`
//! ([`cli`]) use [`client`].

pub(crate) mod cli;
pub(crate) mod client;
pub(crate) mod control;
pub(crate) mod protocol;
pub(crate) mod socket;
