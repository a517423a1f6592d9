#include <rte_config.h>
#include <rte_errno.h>
#include <rte_mbuf.h>
#include <rte_ethdev.h>
#include "shim.h"

int roceprobe_rte_errno(void) { return rte_errno; }

uint16_t roceprobe_mbuf_default_buf_size(void) { return RTE_MBUF_DEFAULT_BUF_SIZE; }

uint64_t roceprobe_rss_hf_ip(void) { return RTE_ETH_RSS_IP; }

uint64_t roceprobe_rx_offload_timestamp(void) { return RTE_ETH_RX_OFFLOAD_TIMESTAMP; }

uint64_t roceprobe_rss_hf_udp(void) { return RTE_ETH_RSS_UDP; }

uint64_t roceprobe_rss_hf_l3_src_dst_only(void) { return RTE_ETH_RSS_L3_SRC_ONLY | RTE_ETH_RSS_L3_DST_ONLY; }

uint64_t roceprobe_rx_offload_scatter(void) { return RTE_ETH_RX_OFFLOAD_SCATTER; }
