int f12(void) { return 12; }
