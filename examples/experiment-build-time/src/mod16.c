int f16(void) { return 16; }
