from torchpatch.cli import main

raise SystemExit(main())
