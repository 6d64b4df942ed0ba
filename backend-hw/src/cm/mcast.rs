//! `rdma_establish`, `rdma_join_multicast(_ex)` and `rdma_leave_multicast`
//! over librdmacm.

use core::ffi::c_void;
use std::net::SocketAddr;

use rdma_sys as sys;
use verbs_api::*;

use crate::backend::HwVerbs;
use crate::errors::c_error;
use crate::ffi::verbs::last_errno;
use crate::sockaddr::SockAddrBuf;

use super::*;

/// `RDMA_CM_JOIN_MC_ATTR_ADDRESS | RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS`.
const JOIN_MC_ATTR_ADDRESS_AND_FLAGS: u32 = 0b11;

impl HwVerbs {
    pub(crate) fn cm_establish(&mut self, id: &HwCmId) -> Result<()> {
        let verb = Verb::RdmaEstablish;
        let p = self.cm_bound_id(id, verb)?;
        // SAFETY: live id bound to a device; librdmacm checks the id's
        // state (and refuses an id with a QP) itself.
        if unsafe { sys::rdma_establish(p) } != 0 {
            return Err(c_error(verb, last_errno(), "rdma_establish"));
        }
        Ok(())
    }

    pub(crate) fn cm_join_multicast(
        &mut self,
        id: &HwCmId,
        addr: SocketAddr,
        flags: Option<McJoinFlag>,
        context: u64,
    ) -> Result<()> {
        let verb = if flags.is_some() {
            Verb::RdmaJoinMulticastEx
        } else {
            Verb::RdmaJoinMulticast
        };
        let p = self.cm_bound_id(id, verb)?;
        let mut a = SockAddrBuf::from_std(&addr);
        // The context travels as the pointer-sized value librdmacm hands
        // back in the event's `param.ud.private_data`; it is never
        // dereferenced.
        let ctx = context as usize as *mut c_void;
        let rc = match flags {
            None => {
                // SAFETY: live id bound to a device; `a` is a valid
                // sockaddr_in/sockaddr_in6 that librdmacm copies.
                unsafe { sys::rdma_join_multicast(p, a.as_mut_ptr(), ctx) }
            }
            Some(f) => {
                let mut attr = sys::rdma_cm_join_mc_attr_ex {
                    comp_mask: JOIN_MC_ATTR_ADDRESS_AND_FLAGS,
                    join_flags: f.to_raw(),
                    addr: a.as_mut_ptr(),
                };
                // SAFETY: as above; `attr` is valid for the call and its
                // address points at `a`, which outlives it.
                unsafe { sys::rdma_join_multicast_ex(p, &mut attr, ctx) }
            }
        };
        if rc != 0 {
            return Err(c_error(verb, last_errno(), verb.c_name()));
        }
        Ok(())
    }

    pub(crate) fn cm_leave_multicast(&mut self, id: &HwCmId, addr: SocketAddr) -> Result<()> {
        let verb = Verb::RdmaLeaveMulticast;
        let p = self.cm_id(id, verb)?;
        let mut a = SockAddrBuf::from_std(&addr);
        // SAFETY: live id; `a` is a valid sockaddr that librdmacm only
        // compares with the joined addresses.
        if unsafe { sys::rdma_leave_multicast(p, a.as_mut_ptr()) } != 0 {
            return Err(c_error(verb, last_errno(), "rdma_leave_multicast"));
        }
        Ok(())
    }
}
