/* fuzz_units.c — libFuzzer target for the unit parser (topo/units.c), which
 * reads link parameters straight from scenario files: any string is parsed
 * as a rate, a time, a loss and a queue; an accepted rate or time must read
 * back the same after formatting. */
#include "topo/units.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char text[256], err[256], formatted[64];
    if (size >= sizeof text) return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    uint64_t rate, time, again;
    double loss;
    struct topo_units_queue queue;
    if (topo_units_parse_rate(text, &rate, err, sizeof err) == 0) {
        topo_units_format_rate(rate, formatted, sizeof formatted);
        if (topo_units_parse_rate(formatted, &again, err, sizeof err) != 0) abort();
        /* Formatting is for messages and plots: three significant digits, so
         * it may round by up to half a unit in the third digit (0.5%). */
        if ((again > rate ? again - rate : rate - again) > rate / 200 + 1) abort();
    }
    if (topo_units_parse_time(text, &time, err, sizeof err) == 0) {
        topo_units_format_time(time, formatted, sizeof formatted);
        if (topo_units_parse_time(formatted, &again, err, sizeof err) != 0) abort();
        if ((again > time ? again - time : time - again) > time / 200 + 1) abort();
    }
    if (topo_units_parse_loss(text, &loss, err, sizeof err) == 0 && !(loss >= 0 && loss <= 1))
        abort();
    topo_units_parse_queue(text, &queue, err, sizeof err);
    return 0;
}
