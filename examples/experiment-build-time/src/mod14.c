int f14(void) { return 14; }
