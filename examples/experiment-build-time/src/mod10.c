int f10(void) { return 10; }
