"""The pure decision core: values in, values out; no I/O, no clock, no event loop."""
