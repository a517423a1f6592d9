/* The DPDK headers roceprobe uses. bindgen reads this file; so does the C file that
 * bindgen writes with out-of-line copies of the static inline functions. */
#include <rte_config.h>
#include <rte_common.h>
#include <rte_errno.h>
#include <rte_eal.h>
#include <rte_lcore.h>
#include <rte_cycles.h>
#include <rte_mempool.h>
#include <rte_mbuf.h>
#include <rte_mbuf_dyn.h>
#include <rte_ethdev.h>
#include <rte_ring.h>
#include <rte_version.h>

#include "shim.h"
