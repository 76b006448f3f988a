/* libFuzzer target: allow_host patterns, request matching and address classes (egress_rules.c).
 * Input: PATTERN '\n' HOST '\n' 16 address bytes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "policy/egress_rules.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  char *text = malloc(size + 1);
  if (!text)
    return 0;
  memcpy(text, data, size);
  text[size] = '\0';
  char *host = strchr(text, '\n');
  if (host)
    *host++ = '\0';
  struct egress_rule r, again;
  sbx_error_t err;
  if (egress_rule_parse(text, &r, &err) == 0) {
    /* What policy show prints parses back to the same rule. */
    char buf[EGRESS_HOST_MAX + 16];
    egress_rule_format(&r, buf, sizeof buf);
    if (egress_rule_parse(buf, &again, &err) < 0 || again.kind != r.kind || again.port != r.port ||
        strcmp(again.host, r.host) != 0)
      abort();
    if (host) {
      char *bytes = strchr(host, '\n');
      if (bytes)
        *bytes++ = '\0';
      struct egress_match m;
      egress_match_host(&r, 1, host, r.port, &m);
      /* A rule always allows what it names, in its own text form. */
      if (r.kind != EGRESS_WILDCARD) {
        egress_match_host(&r, 1, r.host, r.port, &m);
        if (m.verdict != EGRESS_ALLOWED)
          abort();
      }
      if (bytes && strlen(bytes) >= 16) {
        struct egress_addr a = {.family = (bytes[0] & 1) ? 6 : 4};
        memcpy(a.a, bytes, 16);
        (void) egress_check_dest(&r, &a, &a, 1);
        (void) egress_class_name(egress_classify(&a));
      }
    }
  }
  free(text);
  return 0;
}
