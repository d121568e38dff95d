int f07(void) { return 7; }
