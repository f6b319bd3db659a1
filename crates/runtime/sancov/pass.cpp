// memlens' LLVM pass plugin, hand-written (no library counts accesses per
// block or instruments atomics alone). `memlens cc` builds it once per LLVM
// version against llvm-N-dev's headers and loads it with -fpass-plugin; it
// runs at the end of the optimization pipeline (where sancov would), so what
// it counts is what the optimized program executes.
//
// 1. Atomic read-modify-writes (atomicrmw, cmpxchg) call the runtime's
//    `memlens_atomic(address, bytes)` first: sancov traces loads and stores
//    but not these.
// 2. On x86-64, loads and stores are counted per stretch of a basic block
//    between calls, not one callback per access (Examem's compile-time
//    counting): the pass sums each stretch's accesses by class (load/store x
//    1, 2, 4, 8, 16 bytes) and subtracts each sum from that class's
//    thread-local countdown once. Only a subtraction that borrows takes the
//    slow path, which hands the runtime the stretch's addresses and code
//    addresses of that class: the runtime samples exactly the accesses a
//    countdown per access would have (the one at which it borrows, and every
//    period after), so sampling stays as unbiased as before. A stretch ends
//    at every call, so counts are current whenever the runtime is entered
//    (region marks, exit). Other targets keep sancov's callbacks.
// 3. Within a function the countdowns live in registers: each is read from
//    its thread-local slot at entry and after every call, and written back
//    before every call, return and slow path. In memory, each block's
//    subtraction waited on the previous one's store (LULESH's loops of many
//    small blocks ran 1.3x their plain time on that chain); in a register it
//    is one instruction. The runtime sees current counts whenever it runs:
//    it is entered only by a call or the slow path.
#include "llvm/Analysis/TargetLibraryInfo.h"
#include "llvm/IR/Dominators.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/InlineAsm.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/IntrinsicInst.h"
#include "llvm/IR/MDBuilder.h"
#include "llvm/IR/Module.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Passes/PassPlugin.h"
#include "llvm/Config/llvm-config.h"
#if LLVM_VERSION_MAJOR >= 16
#include "llvm/Support/ModRef.h"
#endif
#if LLVM_VERSION_MAJOR >= 17
#include "llvm/TargetParser/Triple.h"
#else
#include "llvm/ADT/Triple.h"
#endif
#include "llvm/Transforms/Utils/BasicBlockUtils.h"
#include "llvm/Transforms/Utils/PromoteMemToReg.h"

#include <algorithm>
#include <optional>

using namespace llvm;

namespace {

// Built against LLVM 14 to 19: the few spellings that changed between them.

// A pointer as the runtime takes it: opaque from LLVM 15, `i8*` in LLVM 14's
// typed modules.
Type *pointer_type(LLVMContext &context) {
#if LLVM_VERSION_MAJOR >= 15
  return PointerType::getUnqual(context);
#else
  return Type::getInt8PtrTy(context);
#endif
}

// StringRef's `starts_with` (LLVM 16 on) or `startswith` (to 18).
bool has_prefix(StringRef text, StringRef prefix) { return text.take_front(prefix.size()) == prefix; }

// The runtime's class order: loads then stores, 1 to 16 bytes.
constexpr unsigned SIZES = 5;
constexpr unsigned CLASSES = 2 * SIZES;
// Accesses of one class handed to the slow path at most: a longer stretch is
// counted in pieces of this many.
constexpr unsigned MOST_PER_CHECK = 64;

struct CountAtomics : PassInfoMixin<CountAtomics> {
  PreservedAnalyses run(Module &module, ModuleAnalysisManager &) {
    SmallVector<Instruction *, 16> atomics;
    for (Function &function : module)
      for (BasicBlock &block : function)
        for (Instruction &inst : block)
          if (isa<AtomicRMWInst>(inst) || isa<AtomicCmpXchgInst>(inst))
            atomics.push_back(&inst);
    if (atomics.empty())
      return PreservedAnalyses::all();
    LLVMContext &context = module.getContext();
    Type *ptr = pointer_type(context);
    FunctionCallee hook = module.getOrInsertFunction("memlens_atomic", Type::getVoidTy(context),
                                                     ptr, Type::getInt32Ty(context));
    const DataLayout &layout = module.getDataLayout();
    for (Instruction *inst : atomics) {
      Value *address;
      Type *type;
      if (auto *rmw = dyn_cast<AtomicRMWInst>(inst)) {
        address = rmw->getPointerOperand();
        type = rmw->getValOperand()->getType();
      } else {
        auto *cmpxchg = cast<AtomicCmpXchgInst>(inst);
        address = cmpxchg->getPointerOperand();
        type = cmpxchg->getNewValOperand()->getType();
      }
      // The builder takes the instruction's debug location for the call.
      IRBuilder<> builder(inst);
      builder.CreateCall(hook, {builder.CreatePointerCast(address, ptr),
                                builder.getInt32(layout.getTypeStoreSize(type))});
    }
    return PreservedAnalyses::none();
  }
};

// One access as the runtime counts it: its class, address and instruction
// (whose line the sample's code address takes).
struct Access {
  unsigned klass;
  Value *address;
  Instruction *inst;
};

// A stretch of a block between calls: its accesses, and where the counting
// goes (before the call or the terminator that ends it).
struct Stretch {
  SmallVector<Access, 8> accesses;
  Instruction *end;
};

// Math library functions: they never call back into the program or the
// runtime. As calls, they made a loop's countdowns go through memory on
// every iteration (`sqrt`, whose errno path is a call until code
// generation inlines the instruction).
constexpr LibFunc MATH[] = {
    LibFunc_sqrt, LibFunc_sqrtf, LibFunc_cbrt,  LibFunc_cbrtf, LibFunc_exp,   LibFunc_expf,
    LibFunc_exp2, LibFunc_exp2f, LibFunc_log,   LibFunc_logf,  LibFunc_log2,  LibFunc_log2f,
    LibFunc_log10, LibFunc_log10f, LibFunc_pow, LibFunc_powf,  LibFunc_sin,   LibFunc_sinf,
    LibFunc_cos,  LibFunc_cosf,  LibFunc_tan,   LibFunc_tanf,  LibFunc_atan,  LibFunc_atanf,
    LibFunc_atan2, LibFunc_atan2f, LibFunc_acos, LibFunc_asin, LibFunc_sinh,  LibFunc_cosh,
    LibFunc_tanh, LibFunc_fabs,  LibFunc_fabsf, LibFunc_floor, LibFunc_floorf, LibFunc_ceil,
    LibFunc_ceilf, LibFunc_trunc, LibFunc_round, LibFunc_fmod, LibFunc_fmin,  LibFunc_fmax,
    LibFunc_copysign};

// Calls that neither enter the runtime nor call back into the program: a
// stretch runs on through them, and the countdowns stay in registers.
// Intrinsics are instructions to code generation (a fused multiply-add, a
// minimum), all but memcpy, memmove and memset, which become calls the
// runtime intercepts.
bool passes_through(const Instruction &inst, const TargetLibraryInfo &library) {
  if (isa<IntrinsicInst>(inst))
    return !isa<AnyMemIntrinsic>(inst);
  const Function *callee = cast<CallBase>(inst).getCalledFunction();
  LibFunc function;
  return callee && library.getLibFunc(*callee, function) &&
         std::find(std::begin(MATH), std::end(MATH), function) != std::end(MATH);
}

// A load or store split into the runtime's classes: the greatest size
// first (a 32-byte vector is two 16-byte accesses, a 12-byte one 8 + 4).
void add_access(SmallVectorImpl<Access> &out, Instruction *inst, Value *address, Type *type,
                bool store, const DataLayout &layout) {
  uint64_t bytes = layout.getTypeStoreSize(type).getKnownMinValue();
  for (int size = SIZES - 1; size >= 0 && bytes > 0; --size) {
    uint64_t each = uint64_t(1) << size;
    for (; bytes >= each; bytes -= each)
      out.push_back({(store ? SIZES : 0) + unsigned(size), address, inst});
  }
}

bool instrumented(const Function &function) {
  if (function.isDeclaration() || function.hasFnAttribute(Attribute::NoSanitizeCoverage) ||
      function.hasFnAttribute(Attribute::DisableSanitizerInstrumentation) ||
      function.hasFnAttribute(Attribute::Naked))
    return false;
  StringRef name = function.getName();
  return !has_prefix(name, "memlens_") && !has_prefix(name, "__sanitizer_") &&
         !name.contains(".module_ctor");
}

// Where the slow path hands over a check's addresses and code addresses.
struct Arrays {
  ArrayType *type;
  Value *addresses;
  Value *code;
};

// A function's countdowns while it runs: a stack slot per class it counts
// (promoted to registers once counted), or none where they stay in
// thread-local memory (functions whose exception pads or asm gotos leave no
// single place to read them back).
struct Cached {
  AllocaInst *slot[CLASSES] = {};
};

// What the counting code refers to, declared once per module at its first
// count: the countdown array, the slow path, the countdown's TBAA tag.
struct Runtime {
  GlobalVariable *countdowns;
  FunctionCallee refill;
  MDNode *tbaa;
  // `lea 0(%rip)`: the code address where it is placed (an access's own).
  InlineAsm *here;
};

struct CountBlocks : PassInfoMixin<CountBlocks> {
  std::optional<Runtime> runtime;

  const Runtime &runtime_of(Module &module) {
    if (runtime)
      return *runtime;
    LLVMContext &context = module.getContext();
    Type *i64 = Type::getInt64Ty(context);
    Type *ptr = pointer_type(context);
    auto *countdowns_type = ArrayType::get(i64, CLASSES);
    auto *countdowns = cast<GlobalVariable>(
        module.getOrInsertGlobal("memlens_countdown", countdowns_type, [&] {
          return new GlobalVariable(module, countdowns_type, false, GlobalValue::ExternalLinkage,
                                    nullptr, "memlens_countdown", nullptr,
                                    GlobalValue::InitialExecTLSModel);
        }));
    // The refill reads the two arrays and nothing else of the program's: the
    // countdown goes as an integer, so that no program access aliases it and
    // it may stay in a register across a loop.
    FunctionCallee refill = module.getOrInsertFunction(
        "memlens_access_refill_block",
        FunctionType::get(i64, {ptr, ptr, i64, i64, Type::getInt32Ty(context), i64}, false));
    if (auto *declared = dyn_cast<Function>(refill.getCallee())) {
      declared->setDoesNotThrow();
#if LLVM_VERSION_MAJOR >= 16
      declared->setMemoryEffects(MemoryEffects::argMemOnly(ModRefInfo::Ref) |
                                 MemoryEffects::inaccessibleMemOnly());
#else
      declared->addFnAttr(Attribute::InaccessibleMemOrArgMemOnly);
#endif
    }
    MDBuilder metadata(context);
    // The countdown's own TBAA type: no typed access of the program aliases it.
    MDNode *root = metadata.createTBAARoot("Simple C/C++ TBAA");
    MDNode *type = metadata.createTBAAScalarTypeNode(
        "memlens countdown", metadata.createTBAAScalarTypeNode("omnipotent char", root));
    auto *here = InlineAsm::get(FunctionType::get(ptr, false), "lea 0(%rip), $0", "=r",
                                /*hasSideEffects=*/true);
    runtime = Runtime{countdowns, refill, metadata.createTBAAStructTagNode(type, type, 0), here};
    return *runtime;
  }

  PreservedAnalyses run(Module &module, ModuleAnalysisManager &) {
    if (!has_prefix(module.getTargetTriple(), "x86_64"))
      return PreservedAnalyses::all();
    runtime.reset();
    const DataLayout &layout = module.getDataLayout();
    TargetLibraryInfoImpl library_info{Triple(module.getTargetTriple())};
    TargetLibraryInfo library(library_info);
    bool changed = false;
    for (Function &function : module) {
      if (!instrumented(function))
        continue;
      SmallVector<Stretch, 16> stretches;
      SmallVector<Instruction *, 16> sync_points;
      bool cacheable = true;
      for (BasicBlock &block : function) {
        cacheable &= !block.isEHPad() || block.isLandingPad();
        Stretch current;
        for (Instruction &inst : block) {
          if (auto *load = dyn_cast<LoadInst>(&inst)) {
            add_access(current.accesses, load, load->getPointerOperand(), load->getType(), false,
                       layout);
          } else if (auto *store = dyn_cast<StoreInst>(&inst)) {
            add_access(current.accesses, store, store->getPointerOperand(),
                       store->getValueOperand()->getType(), true, layout);
          } else if (isa<CallBase>(inst) && passes_through(inst, library)) {
            continue;
          } else if (isa<CallBase>(inst) || inst.isTerminator()) {
            cacheable &= !isa<CallBrInst>(inst);
            // Where the countdowns go back to thread-local memory (and,
            // after a call, are read again).
            if (isa<CallBase>(inst) || isa<ReturnInst>(inst) || isa<ResumeInst>(inst))
              sync_points.push_back(&inst);
            current.end = &inst;
            if (!current.accesses.empty())
              stretches.push_back(std::move(current));
            current = Stretch();
          }
        }
      }
      if (stretches.empty())
        continue;
      // The slow path's two arrays, in the frame once, as long as the most
      // accesses of one class a check hands over.
      size_t most = 0;
      for (const Stretch &stretch : stretches) {
        unsigned per_class[CLASSES] = {};
        for (const Access &access : stretch.accesses)
          most = std::max<size_t>(most, ++per_class[access.klass]);
      }
      most = std::min<size_t>(most, MOST_PER_CHECK);
      IRBuilder<> entry(&*function.getEntryBlock().getFirstInsertionPt());
      Type *ptr = pointer_type(module.getContext());
      Arrays arrays{ArrayType::get(ptr, most), nullptr, nullptr};
      arrays.addresses = entry.CreateAlloca(arrays.type);
      arrays.code = entry.CreateAlloca(arrays.type);
      Cached cached;
      if (cacheable)
        cached = cache(module, function, stretches);
      for (Stretch &stretch : stretches)
        count(module, stretch, arrays, cached);
      if (cacheable) {
        // After the counting: a call's write-back follows its stretch's count.
        sync(module, cached, sync_points);
        SmallVector<AllocaInst *, CLASSES> slots;
        for (AllocaInst *slot : cached.slot)
          if (slot)
            slots.push_back(slot);
        DominatorTree tree(function);
        PromoteMemToReg(slots, tree);
      }
      changed = true;
    }
    return changed ? PreservedAnalyses::none() : PreservedAnalyses::all();
  }

  Value *tls_slot(IRBuilder<> &builder, const Runtime &runtime, unsigned klass) {
    return builder.CreateConstInBoundsGEP2_64(runtime.countdowns->getValueType(),
                                              runtime.countdowns, 0, klass);
  }

  // Copies each cached countdown from thread-local memory (`back` false) or
  // to it, where `builder` stands.
  void copy(IRBuilder<> &builder, const Runtime &runtime, const Cached &cached, bool back) {
    Type *i64 = builder.getInt64Ty();
    for (unsigned klass = 0; klass < CLASSES; ++klass) {
      if (!cached.slot[klass])
        continue;
      Value *tls = tls_slot(builder, runtime, klass);
      if (back) {
        builder.CreateStore(builder.CreateLoad(i64, cached.slot[klass]), tls)
            ->setMetadata(LLVMContext::MD_tbaa, runtime.tbaa);
      } else {
        LoadInst *value = builder.CreateLoad(i64, tls);
        value->setMetadata(LLVMContext::MD_tbaa, runtime.tbaa);
        builder.CreateStore(value, cached.slot[klass]);
      }
    }
  }

  // A stack slot for each class the function counts, read at its entry.
  Cached cache(Module &module, Function &function, ArrayRef<Stretch> stretches) {
    const Runtime &runtime = runtime_of(module);
    Cached cached;
    IRBuilder<> entry(&*function.getEntryBlock().getFirstInsertionPt());
    for (const Stretch &stretch : stretches)
      for (const Access &access : stretch.accesses)
        if (!cached.slot[access.klass])
          cached.slot[access.klass] = entry.CreateAlloca(entry.getInt64Ty());
    copy(entry, runtime, cached, false);
    return cached;
  }

  // The cached countdowns written back before each call and return, and
  // read again after each call.
  void sync(Module &module, const Cached &cached, ArrayRef<Instruction *> sync_points) {
    const Runtime &runtime = runtime_of(module);
    SmallPtrSet<BasicBlock *, 4> pads;
    for (Instruction *inst : sync_points) {
      IRBuilder<> before(inst);
      copy(before, runtime, cached, true);
      auto *call = dyn_cast<CallInst>(inst);
      if (call && !call->isMustTailCall()) {
        IRBuilder<> after(call->getNextNode());
        copy(after, runtime, cached, false);
      } else if (auto *invoke = dyn_cast<InvokeInst>(inst)) {
        BasicBlock *normal = SplitEdge(invoke->getParent(), invoke->getNormalDest());
        IRBuilder<> after(&*normal->getFirstInsertionPt());
        copy(after, runtime, cached, false);
        BasicBlock *pad = invoke->getUnwindDest();
        if (pads.insert(pad).second) {
          IRBuilder<> caught(&*pad->getFirstInsertionPt());
          copy(caught, runtime, cached, false);
        }
      }
    }
  }

  // Subtracts each class's accesses of the stretch from its countdown, the
  // slow path on a borrow.
  void count(Module &module, Stretch &stretch, const Arrays &arrays, const Cached &cached) {
    for (unsigned klass = 0; klass < CLASSES; ++klass) {
      SmallVector<Access, 8> of_class;
      for (const Access &access : stretch.accesses)
        if (access.klass == klass)
          of_class.push_back(access);
      for (size_t first = 0; first < of_class.size(); first += MOST_PER_CHECK) {
        size_t n = std::min<size_t>(MOST_PER_CHECK, of_class.size() - first);
        check(module, klass, ArrayRef<Access>(of_class).slice(first, n), stretch.end, arrays,
              cached);
      }
    }
  }

  void check(Module &module, unsigned klass, ArrayRef<Access> accesses, Instruction *end,
             const Arrays &arrays, const Cached &cached) {
    LLVMContext &context = module.getContext();
    Type *i64 = Type::getInt64Ty(context);
    const Runtime &runtime = runtime_of(module);
    MDBuilder metadata(context);

    const uint64_t n = accesses.size();
    IRBuilder<> builder(end);
    builder.SetCurrentDebugLocation(accesses.back().inst->getDebugLoc());
    AllocaInst *register_slot = cached.slot[klass];
    Value *slot = register_slot ? register_slot : tls_slot(builder, runtime, klass);
    LoadInst *left = builder.CreateLoad(i64, slot);
    if (!register_slot)
      left->setMetadata(LLVMContext::MD_tbaa, runtime.tbaa);
    Value *next = builder.CreateSub(left, builder.getInt64(n));
    Value *borrow = builder.CreateICmpULT(left, builder.getInt64(n));
    Instruction *slow_end = SplitBlockAndInsertIfThen(
        borrow, end, false, metadata.createBranchWeights(1, (1 << 20) - 1));
    BasicBlock *slow = slow_end->getParent();
    BasicBlock *tail = end->getParent();

    IRBuilder<> fill(slow_end);
    for (uint64_t k = 0; k < n; ++k) {
      // Each code address taken where its access's line is.
      fill.SetCurrentDebugLocation(accesses[k].inst->getDebugLoc());
      fill.CreateStore(fill.CreatePointerCast(accesses[k].address, pointer_type(context)),
                       fill.CreateConstInBoundsGEP2_64(arrays.type, arrays.addresses, 0, k));
      CallInst *pc = fill.CreateCall(runtime.here);
      pc->setDoesNotAccessMemory();
      fill.CreateStore(pc, fill.CreateConstInBoundsGEP2_64(arrays.type, arrays.code, 0, k));
    }
    fill.SetCurrentDebugLocation(accesses.back().inst->getDebugLoc());
    // The runtime publishes every class's count from thread-local memory;
    // the refill changes only this class's.
    copy(fill, runtime, cached, true);
    Value *refilled = fill.CreateCall(
        runtime.refill, {fill.CreatePointerCast(arrays.addresses, pointer_type(context)),
                         fill.CreatePointerCast(arrays.code, pointer_type(context)),
                         fill.getInt64(n), left,
                         fill.getInt32(klass), fill.CreatePtrToInt(runtime.countdowns, i64)});

    IRBuilder<> join(&*tail->getFirstInsertionPt());
    join.SetCurrentDebugLocation(accesses.back().inst->getDebugLoc());
    PHINode *value = join.CreatePHI(i64, 2);
    value->addIncoming(next, left->getParent());
    value->addIncoming(refilled, slow);
    StoreInst *kept = join.CreateStore(value, slot);
    if (!register_slot)
      kept->setMetadata(LLVMContext::MD_tbaa, runtime.tbaa);
  }
};

} // namespace

extern "C" LLVM_ATTRIBUTE_WEAK PassPluginLibraryInfo llvmGetPassPluginInfo() {
  return {LLVM_PLUGIN_API_VERSION, "memlens", "2", [](PassBuilder &builder) {
            builder.registerOptimizerLastEPCallback(
                [](ModulePassManager &passes, OptimizationLevel) {
                  passes.addPass(CountAtomics());
                  passes.addPass(CountBlocks());
                });
          }};
}
