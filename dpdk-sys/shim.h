/* What bindgen cannot see: thread-local variables and macros. */
#ifndef ROCEPROBE_DPDK_SHIM_H
#define ROCEPROBE_DPDK_SHIM_H
#include <stdint.h>

/* rte_errno is a per-lcore (thread-local) variable behind a macro. */
int roceprobe_rte_errno(void);
/* RTE_MBUF_DEFAULT_BUF_SIZE is a macro expression. */
uint16_t roceprobe_mbuf_default_buf_size(void);
/* Flag macros the port setup needs: RTE_ETH_RSS_IP, RTE_ETH_RX_OFFLOAD_TIMESTAMP. */
uint64_t roceprobe_rss_hf_ip(void);
uint64_t roceprobe_rx_offload_timestamp(void);
/* And those the port plan's own constants are checked against. */
uint64_t roceprobe_rss_hf_udp(void);
uint64_t roceprobe_rss_hf_l3_src_dst_only(void);
uint64_t roceprobe_rx_offload_scatter(void);
#endif
