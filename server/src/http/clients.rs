//! Connection places per client address. The global cap (`--max-connections`)
//! keeps the process within its descriptors, but one host opening
//! connections as fast as it can would take every place and lock everyone
//! else out; with this cap it takes at most its share. Behind a trusted
//! reverse proxy every connection comes from the proxy, so there the cap is
//! off (the proxy is where to limit clients).

use std::{
    collections::HashMap,
    net::IpAddr,
    sync::{Arc, Mutex},
};

/// The open connections of each client address.
#[derive(Clone)]
pub struct ClientPlaces {
    /// 0: no cap.
    max: usize,
    open: Arc<Mutex<HashMap<IpAddr, usize>>>,
}

/// One connection's place under its client's cap, given back when dropped.
pub struct ClientPlace {
    held: Option<(IpAddr, Arc<Mutex<HashMap<IpAddr, usize>>>)>,
}

/// Who a connection's address counts as: IPv4 clients reaching an IPv6
/// socket are one client either way, and an IPv6 address counts by its /64
/// (one subscriber usually holds a whole /64 and may bind any address in
/// it), as the sign-in throttle counts it.
fn client_of(ip: IpAddr) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V6(v6) => {
            let s = v6.segments();
            IpAddr::V6(std::net::Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
        }
        v4 => v4,
    }
}

impl ClientPlaces {
    pub fn new(max: usize) -> Self {
        ClientPlaces { max, open: Arc::default() }
    }

    /// A place for one more connection from `ip`, or `None` when it has
    /// `max` open already.
    pub fn enter(&self, ip: IpAddr) -> Option<ClientPlace> {
        if self.max == 0 {
            return Some(ClientPlace { held: None });
        }
        let ip = client_of(ip);
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let count = open.entry(ip).or_insert(0);
        if *count >= self.max {
            return None;
        }
        *count += 1;
        Some(ClientPlace { held: Some((ip, Arc::clone(&self.open))) })
    }

    /// Client addresses with a connection open (a figure for tests).
    pub fn clients(&self) -> usize {
        self.open.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

impl Drop for ClientPlace {
    fn drop(&mut self) {
        let Some((ip, open)) = self.held.take() else {
            return;
        };
        let mut open = open.lock().unwrap_or_else(|e| e.into_inner());
        // The entry goes with its last connection: the map holds only
        // clients connected now, however many have come and gone.
        if let Some(count) = open.get_mut(&ip) {
            *count -= 1;
            if *count == 0 {
                open.remove(&ip);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_gets_at_most_its_share_and_its_places_come_back() {
        let places = ClientPlaces::new(2);
        let (a, b): (IpAddr, IpAddr) = ("192.0.2.1".parse().unwrap(), "192.0.2.2".parse().unwrap());
        let first = places.enter(a).unwrap();
        let _second = places.enter(a).unwrap();
        assert!(places.enter(a).is_none(), "a third connection from one client");
        // As an IPv4-mapped IPv6 address it is the same client.
        assert!(places.enter("::ffff:192.0.2.1".parse().unwrap()).is_none());
        let _other = places.enter(b).expect("another client is not affected");
        drop(first);
        let _again = places.enter(a).expect("a place freed is free again");
        assert_eq!(places.clients(), 2);
    }

    #[test]
    fn an_ipv6_client_counts_by_its_64() {
        let places = ClientPlaces::new(2);
        let _a = places.enter("2001:db8:1:2::1".parse().unwrap()).unwrap();
        let _b = places.enter("2001:db8:1:2::2".parse().unwrap()).unwrap();
        assert!(places.enter("2001:db8:1:2:ffff::3".parse().unwrap()).is_none(), "another address of the same /64");
        let _c = places.enter("2001:db8:1:3::1".parse().unwrap()).expect("another /64 is another client");
        assert_eq!(places.clients(), 2);
    }

    #[test]
    fn no_cap_holds_nothing() {
        let places = ClientPlaces::new(0);
        let ip: IpAddr = "192.0.2.1".parse().unwrap();
        let held: Vec<_> = (0..10).map(|_| places.enter(ip).unwrap()).collect();
        assert_eq!((held.len(), places.clients()), (10, 0));
    }
}
