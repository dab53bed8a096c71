/* The agent's environment (API keys, tokens) passed on to the module:
 * escaped if any variable's value starts with "oarbank-secret-". Nothing in
 * the kernel stops this; the launcher must build the module's environment
 * itself rather than pass its own through. */
#include "probe.h"

extern char **environ;

int main(void) {
  static const char kPrefix[] = "oarbank-secret-";
  for (char **e = environ; e && *e; ++e) {
    const char *eq = strchr(*e, '=');
    if (eq && strncmp(eq + 1, kPrefix, sizeof kPrefix - 1) == 0) {
      char name[128];
      size_t len = (size_t)(eq - *e) < sizeof name - 1 ? (size_t)(eq - *e) : sizeof name - 1;
      memcpy(name, *e, len);
      name[len] = '\0';
      escaped("the environment holds %s=%s...", name, kPrefix);
    }
  }
  blocked(0, "no environment value starts with %s", kPrefix);
}
